// serving_memory: what serving calls add to the process's resident memory, on
// a Transformer encoder layer of d_model 2048, nhead 16, dim_feedforward 8192
// (batch_first; 201 MB of float32 parameters), float or prepacked
// (`mha::prepack`): resident bytes after building, after the conversion,
// after a warm-up call and after three calls on (1, 32, 2048), each as a
// multiple of the parameter bytes. One module per process: run it once per
// form (docs/benchmarks.md).
//
// Usage: serving_memory [--prepack]

#include <mha/mha.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

namespace {

/// The process's resident bytes (/proc/self/statm's second field, in pages).
double resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

}  // namespace

int main(int argc, char** argv) {
  const bool prepacked = argc > 1 && std::strcmp(argv[1], "--prepack") == 0;
  torch::manual_seed(0);
  mha::TransformerEncoderLayer layer(
      mha::TransformerLayerOptions(2048, 16).dim_feedforward(8192).batch_first(true));
  layer->eval();
  double parameter_bytes = 0;
  for (const auto& p : layer->parameters()) parameter_bytes += p.numel() * p.element_size();
  const double built = resident_bytes();
  if (prepacked) mha::prepack(layer);
  const double converted = resident_bytes();
  const torch::Tensor src = torch::randn({1, 32, 2048});  // (N, L, E)
  const c10::InferenceMode inference;
  layer(src);
  const double warm = resident_bytes();
  for (int i = 0; i < 3; ++i) layer(src);
  const double served = resident_bytes();
  std::printf("form: %s, parameters %.1f MB, threads %d\n", prepacked ? "prepacked" : "float",
              parameter_bytes / 1e6, at::get_num_threads());
  std::printf(
      "conversion adds %.3fx, warm-up call adds %.3fx, three calls add %.3fx, "
      "serving calls (warm-up + three) add %.3fx the parameter bytes\n",
      (converted - built) / parameter_bytes, (warm - converted) / parameter_bytes,
      (served - warm) / parameter_bytes, (served - converted) / parameter_bytes);
  return 0;
}
