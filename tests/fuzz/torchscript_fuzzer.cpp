// libFuzzer target: the TorchScript reader (torch::jit::load of a
// torch.jit.save archive, then its named parameters and buffers) and loading
// its result into a module.
// Contract and checks: weights_fuzz_target.h. Seeds: tests/fuzz/corpus/torchscript.
//
// Build: -DCMAKE_CXX_COMPILER=clang++-19 -DMHA_BUILD_FUZZERS=ON
// Run:   source tests/sanitizers/env.sh; mha_fuzz_torchscript -max_len=65536 NEW_CORPUS
// tests/fuzz/corpus/torchscript

#include "weights_fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return mha_fuzz::fuzz_weights_file("mha_fuzz_torchscript", &mha::detail::read_torchscript, data,
                                     size);
}
