#pragma once

// The body shared by the weights-reader libFuzzer targets (torch_save_fuzzer.cpp,
// safetensors_fuzzer.cpp, torchscript_fuzzer.cpp): the fuzzed bytes become a
// file, which goes through one format's reader and then through
// `mha::load_state_dict` into a MultiheadAttention(4, 2), the module the seed
// files were saved from (scripts/export_fuzz_seeds.py).
//
// Contract checked for every input:
// - the reader returns or throws a c10::Error whose message starts with the
//   file's path (another exception type, another message, an INTERNAL ASSERT
//   in mha's own code, a crash, a leak or a sanitizer report is a finding;
//   LibTorch's own asserts on a corrupt archive reach the caller as such a
//   c10::Error and are accepted);
// - every tensor it returns is a defined, dense CPU tensor whose elements lie
//   inside its storage: the fuzzer reads each addressed byte in instrumented
//   code, so ASan sees a tensor that reaches past its buffer;
// - a load that throws leaves the module's parameters bitwise unchanged; a load
//   that succeeds gives a module whose forward returns the documented shape.

#include <c10/util/Exception.h>
#include <mha/multihead_attention.h>
#include <mha/state_dict.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "module_state.h"
#include "silent_warnings.h"
#include "state_dict/formats.h"

namespace mha_fuzz {

using Reader = mha::detail::TensorMap (*)(const std::string& path);

[[noreturn]] inline void finding(const char* target, const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", target, what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// One file per process under $TMPDIR, rewritten for every input.
inline const std::string& scratch_path(const char* target) {
  static const std::string path = [target] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir != nullptr ? dir : "/tmp") + "/" + target + "." +
           std::to_string(::getpid()) + ".bin";
  }();
  return path;
}

/// Reads, in this instrumented code, every byte of `tensor`'s storage that
/// its sizes, strides and offset address; returns their sum so that the reads
/// are not optimised away.
inline uint64_t touch_addressed_bytes(const torch::Tensor& tensor) {
  if (tensor.numel() == 0) return 0;
  int64_t last = tensor.storage_offset();
  for (int64_t d = 0; d < tensor.dim(); ++d) last += (tensor.size(d) - 1) * tensor.stride(d);
  const auto item = static_cast<int64_t>(tensor.element_size());
  const auto* bytes = static_cast<const uint8_t*>(tensor.storage().data());
  uint64_t sum = 0;
  for (int64_t i = tensor.storage_offset() * item; i < (last + 1) * item; ++i) sum += bytes[i];
  return sum;
}

/// The input being run. libFuzzer learns the strings the harness compares
/// (the internal-assert marker below included) and writes them into inputs,
/// which a reader's message then quotes (a global's name): a marker the input
/// itself holds is not an internal assert.
inline std::string_view& current_input() {
  static std::string_view input;
  return input;
}

/// Runs `body`; a c10::Error is an accepted outcome unless it is an internal
/// assert raised in mha's sources (MHA_SOURCE_DIR; not a quote of the input)
/// or, when `path` is given, its message does not start with `path`. Returns
/// whether `body` completed.
template <typename Body>
bool completes(const char* target, const char* step, const std::string& path, Body&& body) {
  try {
    body();
    return true;
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    constexpr const char* kMarker = "INTERNAL ASSERT FAILED at \"" MHA_SOURCE_DIR;
    if (message.find(kMarker) != std::string::npos &&
        current_input().find("INTERNAL ASSERT") == std::string_view::npos) {
      finding(target, std::string(step) + ": internal assert in mha: " + message);
    }
    if (!path.empty() && message.rfind(path, 0) != 0) {
      finding(target, std::string(step) + ": error does not name the file: " + message);
    }
  } catch (const std::exception& e) {
    finding(target, std::string(step) + ": exception other than c10::Error: " + e.what());
  }
  return false;
}

/// The whole check for one input (see the file comment).
inline int fuzz_weights_file(const char* target, Reader reader, const uint8_t* data, size_t size) {
  static mha::support::SilentWarnings silent;  // warnings are not findings
  static const bool initialised = [] {
    torch::set_num_threads(1);
    c10::WarningUtils::set_warning_handler(&silent);
    return true;
  }();
  (void)initialised;
  static mha::MultiheadAttention module(4, 2);
  static const mha::support::ModuleState original = mha::support::snapshot(*module);

  current_input() = std::string_view(reinterpret_cast<const char*>(data), size);
  const std::string& path = scratch_path(target);
  {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }

  mha::detail::TensorMap tensors;
  completes(target, "reader", path, [&] { tensors = reader(path); });
  volatile uint64_t sink = 0;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined() || !tensor.device().is_cpu() || tensor.layout() != torch::kStrided) {
      finding(target, "reader returned '" + name + "' undefined, not on the CPU or not dense");
    }
    sink = sink + touch_addressed_bytes(tensor);
  }

  const bool loaded =
      completes(target, "load_state_dict", path, [&] { mha::load_state_dict(*module, path); });
  if (!loaded) {
    if (const auto what = mha::support::state_difference(mha::support::snapshot(*module), original);
        !what.empty()) {
      finding(target, "a failed load changed the module: " + what);
    }
    return 0;
  }
  completes(target, "forward", "", [&] {
    torch::NoGradGuard no_grad;
    const auto x = torch::ones({3, 1, 4});  // (L, N, E)
    const auto out = std::get<0>(module->forward(x, x, x));
    if (out.sizes() != x.sizes()) finding(target, "forward after a load gave the wrong shape");
  });
  torch::NoGradGuard no_grad;  // back to the original weights for the next input
  auto params = module->named_parameters();
  for (const auto& [name, value] : original) params[name].copy_(value);
  return 0;
}

}  // namespace mha_fuzz
