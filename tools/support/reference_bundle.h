#pragma once

// Reads the reference files that scripts/export_reference.py writes: one case of
// Python's torch.nn.MultiheadAttention (options, weights, inputs, outputs,
// gradients), saved by `torch.save` as a plain dict of plain values and tensors.

#include <mha/multihead_attention.h>
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mha {
namespace support {

/// Magic number and format version written by export_reference.py.
constexpr int64_t kReferenceMagic = 20261129;
constexpr int64_t kReferenceVersion = 2;

/// Named tensors in the order Python wrote them.
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// One reference case: what Python built, what it was called with, what it returned.
struct ReferenceCase {
  std::string name;
  MultiheadAttentionOptions options{1, 1};
  bool need_weights = true;
  bool average_attn_weights = true;
  bool is_causal = false;
  bool training = false;
  bool grad = false;
  std::string qkv_identity;  ///< "qkv": q is k is v; "kv": k is v; "none"
  std::string dtype;         ///< Python's name: float16, bfloat16, float32 or float64
  int64_t forward_seed = 0;  ///< torch::manual_seed before forward (dropout)
  /// "native": Python's module ran `torch._native_multi_head_attention`;
  /// "functional": it ran `F.multi_head_attention_forward`.
  std::string python_kernel;
  int64_t init_seed = 0;                            ///< torch::manual_seed before construction
  NamedTensors init_state_dict;                     ///< float32 parameters right after construction
  NamedTensors state_dict;                          ///< the weights the outputs were computed with
  std::map<std::string, torch::Tensor> inputs;      ///< query, key, value, masks
  std::map<std::string, torch::Tensor> expected;    ///< output[, weights]
  std::map<std::string, torch::Tensor> cotangents;  ///< output[, weights]
  std::map<std::string, torch::Tensor> grads;       ///< query/key/value, param.<name>
  std::optional<double> python_median_us;           ///< bundles only
  std::optional<int64_t> python_threads;            ///< bundles only: threads Python was timed on
};

/// Reads a reference file; throws c10::Error naming the file and the problem
/// (missing file, bad magic, wrong version, missing entry).
ReferenceCase read_reference_case(const std::string& path);

/// A module built from the case's options, converted to the case's dtype,
/// with its `state_dict` copied in and put in train or eval mode.
MultiheadAttention make_module(const ReferenceCase& reference);

/// query, key, value as fresh leaf tensors with Python's identity
/// (the same tensor object where Python passed the same object), on `device`.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> make_inputs(
    const ReferenceCase& reference, bool requires_grad, torch::Device device = torch::kCPU);

}  // namespace support
}  // namespace mha
