// libFuzzer target: the torch.save reader (zip archive, weights-only pickle
// reader, tensor bounds, naming rules) and loading its result into a module.
// Contract and checks: weights_fuzz_target.h. Seeds: tests/fuzz/corpus/torch_save.
//
// Build: -DCMAKE_CXX_COMPILER=clang++-19 -DMHA_BUILD_FUZZERS=ON
// Run:   source tests/sanitizers/env.sh; mha_fuzz_torch_save -max_len=65536 NEW_CORPUS
// tests/fuzz/corpus/torch_save

#include "weights_fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const mha_fuzz::Reader tensors_only = [](const std::string& path) {
    return mha::detail::read_torch_save(path).tensors;
  };
  return mha_fuzz::fuzz_weights_file("mha_fuzz_torch_save", tensors_only, data, size);
}
