// panel_gemm_layouts: mha's panel GEMM against oneDNN's GEMM on its packed
// layout, both as prepacked weights (PackedWeightImpl) read from memory (a
// turn through 16 copies of each weight, 64 MB and more), at the rows of a
// decode step (1-64) and of a prompt (256), 1 and 2 threads; with --encoder,
// BERT-base's weights at the rows of its calls (16 to 4,096). Prints the
// markdown table of bench/results/panel-gemm-*.md: median time of the panels
// over oneDNN's (below 1: the panels are faster). Not a test; not in CI.

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "linear/packed_weight.h"

namespace {

using mha::detail::PackedLayout;
using mha::detail::PackedWeightImpl;
using torch::Tensor;

constexpr int kCopies = 16, kRounds = 7;

/// Median microseconds of `call`, each round `calls` calls.
template <typename Call>
double median_us(Call&& call, int calls) {
  for (int i = 0; i < 3; ++i) call();
  std::vector<double> rounds;
  for (int r = 0; r < kRounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) call();
    rounds.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count() /
        calls);
  }
  std::nth_element(rounds.begin(), rounds.begin() + kRounds / 2, rounds.end());
  return rounds[kRounds / 2];
}

/// Median time of `layout`'s GEMM of x over the copies of a weight.
double time_layout(const std::vector<Tensor>& weights,
                   const Tensor& bias,
                   const Tensor& x,
                   PackedLayout layout) {
  std::vector<PackedWeightImpl> packed;
  for (const Tensor& w : weights) packed.emplace_back(w, std::vector<int64_t>{w.size(0)}, layout);
  size_t next = 0;
  // about 2 GFLOP a round, at most two turns through the copies
  const int64_t flops = 2 * x.size(0) * x.size(1) * bias.size(0);
  const int calls = static_cast<int>(std::clamp<int64_t>(2'000'000'000 / flops, 1, 2 * kCopies));
  return median_us([&] { packed[next++ % packed.size()].forward(x, bias); }, calls);
}

}  // namespace

int main(int argc, char** argv) {
  const c10::InferenceMode inference;
  const bool encoder = argc > 1 && std::strcmp(argv[1], "--encoder") == 0;
  const std::vector<std::pair<int64_t, int64_t>> shapes =
      encoder ? std::vector<std::pair<int64_t, int64_t>>{{768, 768}, {3072, 768}, {768, 3072}}
              : std::vector<std::pair<int64_t, int64_t>>{
                    {512, 512}, {1536, 512}, {2048, 512}, {512, 2048}, {32000, 512}};
  const std::vector<int64_t> rows = encoder ? std::vector<int64_t>{16, 128, 1024, 4096}
                                            : std::vector<int64_t>{1, 2, 4, 16, 64, 256};
  std::printf("| threads | weight (out x in) |");
  for (int64_t m : rows) std::printf(" M=%ld |", static_cast<long>(m));
  std::printf("\n|---|---|");
  for (size_t i = 0; i < rows.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (const auto& [out, in] : shapes) {
      const int copies = out * in > (int64_t{1} << 22) ? 2 : kCopies;
      std::vector<Tensor> weights;
      for (int i = 0; i < copies; ++i) weights.push_back(torch::randn({out, in}));
      const Tensor bias = torch::randn({out});
      std::printf("| %d | %ld x %ld |", threads, static_cast<long>(out), static_cast<long>(in));
      for (int64_t m : rows) {
        const Tensor x = torch::randn({m, in});
        const double panels = time_layout(weights, bias, x, PackedLayout::kPanels);
        const double onednn = time_layout(weights, bias, x, PackedLayout::kOneDnn);
        std::printf(" %.2f |", panels / onednn);
        std::fflush(stdout);
      }
      std::printf("\n");
    }
  }
}
