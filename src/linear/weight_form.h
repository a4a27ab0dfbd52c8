#pragma once

// Private: a weight parameter converted for inference. `mha::quantize_dynamic`
// (int8, `Int8WeightImpl`) and `mha::prepack` (oneDNN's blocked float32,
// `PackedWeightImpl`) leave the parameter under its name with no elements (a
// float32 (0) placeholder: the dtype and device every check reads) and hold
// the weight once, in its converted form: the child module `<param>_int8` or
// `<param>_packed` of the module that owns the parameter. Every GEMM of mha's
// calls on a converted weight goes through this interface.

#include <torch/nn/module.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "linear/apply_fused_activation.h"

namespace mha {
namespace detail {

/// A converted weight (out, in), split in row blocks, and its GEMMs.
class WeightForm {
 public:
  virtual ~WeightForm() = default;
  /// x (..., in) -> (..., out), plus `bias` (out) when defined.
  virtual torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& bias) const = 0;
  /// Rows [begin, begin + rows) only: x (..., in) -> (..., rows), plus `bias`
  /// (rows); the blocks holding them are computed, then narrowed if needed.
  virtual torch::Tensor forward_rows(int64_t begin,
                                     int64_t rows,
                                     const torch::Tensor& x,
                                     const torch::Tensor& bias) const = 0;
  /// activation(forward(x, bias)): the form's GEMM with the ReLU or GELU
  /// fused where it takes it as a post-op (prepacked: no second pass over
  /// the output, no second output tensor), else `forward` and the activation
  /// in place.
  virtual torch::Tensor forward_activated(const torch::Tensor& x,
                                          const torch::Tensor& bias,
                                          FusedActivation activation) const {
    return apply_fused_activation(activation, forward(x, bias));
  }
  /// The weight's float32 (out, in) values, bit for bit, when the form keeps
  /// them (prepacked); nullopt for int8.
  virtual std::optional<torch::Tensor> float_weight() const = 0;
  virtual int64_t out_features() const = 0;
  virtual int64_t in_features() const = 0;
  /// What the form is, for messages: "int8 (mha::quantize_dynamic)".
  virtual const char* kind() const = 0;
  /// Throws a c10::Error naming `name` unless `archive` holds what this
  /// form's `save` writes, of the same shape (`torch::load`'s check).
  virtual void check_archived(torch::serialize::InputArchive& archive,
                              const std::string& name) const = 0;
};

/// Rows [begin, begin + rows) of a weight split in blocks of `block_rows`
/// rows: the blocks overlapping them, each computed by `multiply_block(i)`
/// ((M, rows of block i)), concatenated and narrowed: -> (M, rows).
torch::Tensor multiply_row_blocks(const std::vector<int64_t>& block_rows,
                                  int64_t begin,
                                  int64_t rows,
                                  const std::function<torch::Tensor(int64_t)>& multiply_block);

/// The `to()` of a converted weight: throws a c10::Error naming `kind`
/// unless the conversion is to float32 on the CPU (nothing to convert).
void reject_conversion(const char* kind,
                       std::optional<torch::Device> device,
                       std::optional<torch::Dtype> dtype);

/// Whether `weight` is a converted parameter's placeholder (float32 (0)).
inline bool is_placeholder(const torch::Tensor& weight) {
  return weight.defined() && weight.dim() == 1 && weight.numel() == 0;
}

/// The converted form of `owner`'s parameter `param` (its `<param>_int8` or
/// `<param>_packed` child), or null when it has none. Callers look only for
/// placeholders (`is_placeholder`): a weight set since the conversion is
/// used as it is.
std::shared_ptr<const WeightForm> weight_form(const torch::nn::Module& owner,
                                              const std::string& param);

/// The parameter whose form a child of that name holds (`in_proj_weight` for
/// `in_proj_weight_packed`), or nullopt when `child` is not a form's name.
std::optional<std::string> converted_param(const std::string& child);

/// The values `owner`'s parameter `param` computes with: the parameter, or
/// its prepacked form's float32 values (a copy) when it is a placeholder;
/// for Python's kernels (`set_python_kernels`), which take float weights.
torch::Tensor float_weight(const torch::nn::Module& owner,
                           const std::string& param,
                           const torch::Tensor& value);

}  // namespace detail
}  // namespace mha
