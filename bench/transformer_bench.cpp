// Benchmark of mha::TransformerEncoderLayer against LibTorch's
// torch::nn::TransformerEncoderLayer (same weights, its sequence-first layout)
// in eval and inference mode, float32, d_model 512, nhead 8, dim_feedforward
// 2048, no masks, on 1 and 2 intra-op threads. Python's
// nn.TransformerEncoderLayer is timed on the same shapes by
// scripts/bench_transformer_python.py; docs/benchmarks.md has the results.
//
// Benchmark names: encoder_layer/<ours|libtorch>/N:<n>/L:<l>/threads:<t>.
// --mha_smoke: each benchmark for one iteration (the output cross-check kept).

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <mha/state_dict.h>
#include <mha/transformer.h>
#include <torch/torch.h>

#include <cstring>
#include <string>

namespace {

using torch::Tensor;

constexpr int64_t kDModel = 512, kNHead = 8, kFeedForward = 2048;
constexpr int64_t kShapes[][2] = {{1, 128}, {8, 128}, {4, 1024}};  // (N, L)

/// Ours (batch_first, Python's fast path) and LibTorch's layer with the same weights.
struct Layers {
  mha::TransformerEncoderLayer ours{mha::TransformerEncoderLayerOptions(kDModel, kNHead)
                                        .dim_feedforward(kFeedForward)
                                        .batch_first(true)};
  torch::nn::TransformerEncoderLayer libtorch{
      torch::nn::TransformerEncoderLayerOptions(kDModel, kNHead).dim_feedforward(kFeedForward)};

  Layers() {
    // The same parameter names: LibTorch's layer takes ours strictly.
    const auto state = mha::state_dict(*ours);
    mha::load_state_dict(*libtorch, std::map<std::string, Tensor>(state.begin(), state.end()));
    ours->eval();
    libtorch->eval();
  }
};

void run(benchmark::State& state, bool ours, int64_t batch, int64_t len, int threads) {
  at::set_num_threads(threads);
  Layers layers;  // outside InferenceMode: its parameters can be prepacked
  c10::InferenceMode inference;
  const Tensor src = torch::randn({batch, len, kDModel});         // (N, L, E)
  const Tensor src_seq_first = src.transpose(0, 1).contiguous();  // (L, N, E) for LibTorch
  // Cross-check: both compute the same layer.
  const Tensor expected = layers.ours(src);
  const Tensor other = layers.libtorch(src_seq_first).transpose(0, 1);
  if (!torch::allclose(expected, other, 1e-4, 1e-4)) {
    state.SkipWithError("ours and LibTorch's outputs differ");
    return;
  }
  for (auto _ : state) {
    Tensor out = ours ? layers.ours(src) : layers.libtorch(src_seq_first);
    benchmark::DoNotOptimize(out.data_ptr());
  }
}

void register_all(bool smoke) {
  for (const int threads : {1, 2}) {
    for (const auto& shape : kShapes) {
      for (const bool ours : {true, false}) {
        const std::string name = std::string("encoder_layer/") + (ours ? "ours" : "libtorch") +
                                 "/N:" + std::to_string(shape[0]) +
                                 "/L:" + std::to_string(shape[1]) +
                                 "/threads:" + std::to_string(threads);
        auto* b =
            benchmark::RegisterBenchmark(name.c_str(), run, ours, shape[0], shape[1], threads);
        b->Unit(benchmark::kMicrosecond)->UseRealTime();
        if (smoke)
          b->Iterations(1);
        else
          b->MinTime(1.0)->Repetitions(3)->ReportAggregatesOnly(true);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = false;
  for (int i = 1; i < argc; ++i) smoke = smoke || std::strcmp(argv[i], "--mha_smoke") == 0;
  register_all(smoke);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
