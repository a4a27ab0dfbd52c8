// libFuzzer target: the safetensors reader (header size, JSON header, dtypes,
// offsets) and loading its result into a module.
// Contract and checks: weights_fuzz_target.h. Seeds: tests/fuzz/corpus/safetensors.
//
// Build: -DCMAKE_CXX_COMPILER=clang++-19 -DMHA_BUILD_FUZZERS=ON
// Run:   source tests/sanitizers/env.sh; mha_fuzz_safetensors NEW_CORPUS
// tests/fuzz/corpus/safetensors

#include "weights_fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return mha_fuzz::fuzz_weights_file("mha_fuzz_safetensors", &mha::detail::read_safetensors, data,
                                     size);
}
