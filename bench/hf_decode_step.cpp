// decode_step_profile --hf DIR (hf_decode_step.h): a Marian-shaped model's
// greedy step, the embedding, the decoder through its cache, the LM head and
// the argmax, after a 32-token source and 8 decoded positions.

#include "hf_decode_step.h"

#include <ATen/Parallel.h>
#include <mha/generation.h>
#include <mha/hf_models.h>
#include <mha/state_dict.h>
#include <torch/torch.h>

#include <cstdio>
#include <optional>
#include <vector>

#include "step_timing.h"

namespace hf_decode_step {
namespace {

using step_timing::median;
using step_timing::ms_since;
using torch::Tensor;

constexpr int64_t kSource = 32, kWarm = 8, kSteps = 48, kGenerated = 64;

/// A model at batch `n`: its memory, cache and newest tokens.
struct Greedy {
  mha::Seq2SeqLM model{nullptr};
  Tensor memory, newest;
  std::optional<mha::TransformerDecoderCache> cache;

  Greedy(const std::string& directory, const std::string& form, int64_t n) {
    model = mha::load_hf_model(
                directory,
                mha::HfModelLoadOptions().prepack(form != "float").decoder_panels(form != "onednn"))
                .as<mha::Seq2SeqLM>();
    const int64_t vocab = model->options.vocab_size();
    const Tensor source = torch::randint(2, vocab - 1, {n, kSource});  // (N, S)
    const c10::InferenceMode inference;
    memory = model->encode(source);  // (N, S, E)
    cache.emplace(model->make_cache(kWarm + kSteps + 2));
    newest = torch::zeros({n, 1}, torch::kLong);
    step(memory);
    for (int64_t i = 1; i < kWarm; ++i) step();
  }

  /// One position: logits (N, 1, vocab) -> the next tokens (N, 1).
  void step(const Tensor& first_memory = {}) {
    newest = model->decode_cached(newest, first_memory, *cache).argmax(-1);
  }

  /// The bytes of the weights a step reads: the decoder's but two thirds of
  /// the cross-attention's in_proj (its keys and values are cached), the
  /// token table's rows it looks up, and the LM head.
  int64_t weight_bytes_per_step() const {
    int64_t bytes = model->lm_head->options.in_features() * model->options.vocab_size() * 4;
    for (const auto& [name, tensor] : mha::state_dict(*model->transformer->decoder.ptr())) {
      const bool cross_in_proj = name.find("multihead_attn.in_proj_") != std::string::npos;
      bytes += cross_in_proj ? tensor.nbytes() / 3 : tensor.nbytes();
    }
    return bytes;
  }
};

void profile_cell(const std::string& directory, const std::string& form, int64_t n, int threads) {
  at::set_num_threads(threads);
  torch::manual_seed(0);
  Greedy g(directory, form, n);
  const c10::InferenceMode inference;
  std::vector<double> times;
  for (int64_t i = 0; i < kSteps - 2; ++i) {
    const auto start = std::chrono::steady_clock::now();
    g.step();
    times.push_back(ms_since(start));
  }
  const double step_ms = median(times);
  const int64_t ops = step_timing::ops_in([&] { g.step(); });
  const int64_t bytes = g.weight_bytes_per_step();
  const double weight_gbps = static_cast<double>(bytes) / step_ms / 1e6;
  const double sweep = step_timing::sweep_gbps(bytes);
  std::printf("| %ld | %d | %.3f | %ld | %.1f MB | %.2f | %.2f | %.0f%% |\n", static_cast<long>(n),
              threads, step_ms, static_cast<long>(ops), bytes / 1e6, weight_gbps, sweep,
              100.0 * weight_gbps / sweep);
  step_timing::print_top_level_ops("", [&] { g.step(); });
  std::fflush(stdout);
}

/// One `generate` call of 64 new tokens for `n` 32-token sources with
/// `beams` beams: its wall time (median of 3) and its top-level ops.
void profile_generate_cell(const std::string& directory, int64_t n, int64_t beams, int threads) {
  at::set_num_threads(threads);
  torch::manual_seed(0);
  auto model = mha::load_hf_model(directory).as<mha::Seq2SeqLM>();
  const auto config =
      mha::read_generation_config(directory).num_beams(beams).max_new_tokens(kGenerated);
  const Tensor source = torch::randint(2, model->options.vocab_size() - 1, {n, kSource});
  const auto call = [&] { mha::generate(model, source, Tensor(), config); };
  std::vector<double> times;
  for (int i = 0; i < 4; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    if (i > 0) times.push_back(ms_since(start));  // the first call warms up
  }
  std::printf("| %ld | %ld | %d | %.1f |\n", static_cast<long>(n), static_cast<long>(beams),
              threads, median(times));
  step_timing::print_top_level_ops("", call, 14);
  std::fflush(stdout);
}

}  // namespace

void profile_generate(const std::string& directory) {
  std::printf("| N | beams | threads | generate ms |\n|---|---|---|---|\n");
  for (const int t : {1, 2}) {
    for (const int64_t n : {1, 16}) {
      for (const int64_t beams : {1, 4}) profile_generate_cell(directory, n, beams, t);
    }
  }
}

void profile(const std::string& directory, const std::string& form) {
  std::printf(
      "| N | threads | step ms | ops | weights per step | weight GB/s | sweep GB/s | share of "
      "sweep |\n|---|---|---|---|---|---|---|---|\n");
  for (const int t : {1, 2}) {
    for (const int64_t n : {1, 16, 64}) profile_cell(directory, form, n, t);  // 64: 16 x 4 beams
  }
}

}  // namespace hf_decode_step
