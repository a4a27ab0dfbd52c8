// Greedy decoding with a Transformer decoder: a 6-layer mha::TransformerDecoder
// (d_model 512, nhead 8, dim_feedforward 2048, batch_first, eval, float32,
// InferenceMode, one intra-op thread), memory of 64 positions, a 32-token
// prompt, then 128 generated tokens. Tokens are embedded by a random (1000,
// 512) table and picked by argmax over the tied output projection, the same
// in scripts/bench_transformer_decoding_python.py.
//   greedy/cached/N:<n>     forward_cached: the prompt in one call, then one
//                           position per step (a TransformerDecoderCache)
//   greedy/recompute/N:<n>  forward on the whole prefix at every step (the
//                           loop without a cache), for reference
// --greedy_smoke: each benchmark once with 8 generated tokens; cached and
// recomputed tokens must agree. --greedy_round=N: one warm-up and one timed
// cached decode of batch N, printing "cached_ms <ms>" (the Python script runs
// this between its own rounds, so both sides see the same machine load).

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <mha/transformer.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using torch::Tensor;

constexpr int64_t kDModel = 512, kNHead = 8, kFeedForward = 2048, kLayers = 6;
constexpr int64_t kVocab = 1000, kMemory = 64, kPrompt = 32;
bool smoke = false;       // --greedy_smoke
int64_t generated = 128;  // --greedy_smoke: 8
bool any_error = false;

struct Greedy {
  mha::TransformerDecoder decoder{mha::TransformerDecoderOptions(
      mha::TransformerDecoderLayer(mha::TransformerDecoderLayerOptions(kDModel, kNHead)
                                       .dim_feedforward(kFeedForward)
                                       .batch_first(true)),
      kLayers)};
  Tensor embedding;  // (V, E), also the output projection
  Tensor memory;     // (N, S, E)
  Tensor prompt;     // (N, P) token ids

  explicit Greedy(int64_t n) {
    torch::manual_seed(0);
    decoder->eval();
    embedding = torch::randn({kVocab, kDModel});
    memory = torch::randn({n, kMemory, kDModel});
    prompt = torch::randint(kVocab, {n, kPrompt});
  }

  /// The next tokens (N, 1) from the decoder's output (N, L, E) at its last position.
  Tensor next(const Tensor& out) const {
    return at::linear(out.select(1, -1), embedding).argmax(-1, /*keepdim=*/true);
  }

  /// Prompt, then `generated` tokens; the new positions only, one call each.
  Tensor cached() {
    auto cache = decoder->make_cache(kPrompt + generated);
    Tensor tokens = prompt;
    Tensor newest = prompt;  // (N, L_new)
    for (int64_t i = 0; i < generated; ++i) {
      const Tensor out = decoder->forward_cached(at::embedding(embedding, newest),
                                                 i == 0 ? memory : Tensor(), cache);
      newest = next(out);
      tokens = at::cat({tokens, newest}, 1);
    }
    return tokens;
  }

  /// The same loop without a cache: the whole prefix at every step.
  Tensor recompute() {
    Tensor tokens = prompt;
    for (int64_t i = 0; i < generated; ++i) {
      const int64_t len = tokens.size(1);
      const Tensor out = decoder->forward(at::embedding(embedding, tokens), memory,
                                          mha::generate_square_subsequent_mask(len), {}, {}, {},
                                          /*tgt_is_causal=*/true);
      tokens = at::cat({tokens, next(out)}, 1);
    }
    return tokens;
  }
};

void run(benchmark::State& state, bool cached, int64_t n) {
  at::set_num_threads(1);
  Greedy g(n);  // outside InferenceMode: its parameters can be prepacked
  c10::InferenceMode inference;
  if (smoke && !torch::equal(g.cached(), g.recompute())) {
    std::fprintf(stderr, "transformer_decode_bench: N=%ld cached and recomputed tokens differ\n",
                 static_cast<long>(n));
    any_error = true;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(cached ? g.cached() : g.recompute());
  }
  state.counters["tokens_per_s"] = benchmark::Counter(
      static_cast<double>(n * generated), benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  for (const bool cached : {true, false}) {
    for (const int64_t n : {1, 8}) {
      const std::string name =
          std::string("greedy/") + (cached ? "cached" : "recompute") + "/N:" + std::to_string(n);
      auto* b = benchmark::RegisterBenchmark(name.c_str(),
                                             [=](benchmark::State& s) { run(s, cached, n); });
      b->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
      b->Repetitions(smoke ? 1 : cached ? 5 : 3);
    }
  }
}

/// --greedy_round=N: one warm-up decode, then one timed one.
int run_round(int64_t n) {
  at::set_num_threads(1);
  Greedy g(n);  // outside InferenceMode: its parameters can be prepacked
  c10::InferenceMode inference;
  g.cached();
  const auto start = std::chrono::steady_clock::now();
  benchmark::DoNotOptimize(g.cached());
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("cached_ms %.3f\n", ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--greedy_round=", 15) == 0)
      return run_round(std::atol(argv[i] + 15));
    if (std::strcmp(argv[i], "--greedy_smoke") == 0) {
      smoke = true;
      generated = 8;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return any_error ? 1 : 0;
}
