// encoder_call_profile DIR [--float|--panels|--onednn] [N L]: where the time of one call of a
// Hugging Face text encoder (mha::TextEncoderModel from mha::load_hf_model, as
// loaded: prepacked; --float: prepack(false); --panels / --onednn: prepacked
// in mha's panels / oneDNN's layout, encoder_panels(true / false)) goes, at (N, L) = (1, 16),
// (1, 128), (8, 128) (or the one cell N L) and 1 and 2 threads: the median call, its ATen ops, and
// the top-level ops by time (docs/benchmarks.md, the BERT section).

#include <ATen/Parallel.h>
#include <mha/hf_models.h>
#include <mha/prepack.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "step_timing.h"

namespace {

using torch::Tensor;

void profile_cell(mha::TextEncoderModel& model, int64_t n, int64_t length, int threads) {
  at::set_num_threads(threads);
  const Tensor ids = torch::randint(1000, model->options.vocab_size(), {n, length});  // (N, L)
  const c10::InferenceMode inference;
  auto call = [&] { model(ids); };
  const int iters = n * length > 1024 ? 3 : 15;
  for (int i = 0; i < 3; ++i) call();
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    times.push_back(step_timing::ms_since(start));
  }
  std::printf("| (%ld, %ld) | %d | %.2f | %ld |\n", static_cast<long>(n), static_cast<long>(length),
              threads, step_timing::median(times), static_cast<long>(step_timing::ops_in(call)));
  step_timing::print_top_level_ops("", call);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  TORCH_CHECK(argc >= 2, "usage: encoder_call_profile DIR [--float|--panels|--onednn] [N L]");
  const std::string layout = argc > 2 && argv[2][0] == '-' ? argv[2] : "";
  const int cell = layout.empty() ? 2 : 3;  // where N L start, if given
  std::vector<std::pair<int64_t, int64_t>> cells = {{1, 16}, {1, 128}, {8, 128}};
  if (argc >= cell + 2) cells = {{std::stoll(argv[cell]), std::stoll(argv[cell + 1])}};
  TORCH_CHECK(layout.empty() || layout == "--float" || layout == "--panels" || layout == "--onednn",
              "encoder_call_profile: unknown option ", layout);
  const auto options =
      mha::HfModelLoadOptions()
          .prepack(layout != "--float")
          .encoder_panels(layout.empty() ? std::nullopt
                                         : std::optional<bool>(layout == "--panels"));
  auto model = mha::load_hf_model(argv[1], options).as<mha::TextEncoderModel>();
  std::printf("encoder_call_profile %s, %s (OMP_WAIT_POLICY=%s)\n\n", argv[1],
              layout.empty() ? "as loaded (prepacked)" : layout.c_str() + 2,
              std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "unset");
  std::printf("| (N, L) | threads | call ms | ATen ops |\n|---|---|---|---|\n");
  for (const int t : {1, 2}) {
    for (const auto& [n, length] : cells) profile_cell(model, n, length, t);
  }
  return 0;
}
