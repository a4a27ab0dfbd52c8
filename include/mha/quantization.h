#pragma once

// int8 inference: the projections of mha's modules and LibTorch's
// `torch::nn::Linear` modules with int8 weights, activations quantized per
// call (dynamic quantization), attention itself in float32.

#include <c10/util/Exception.h>
#include <mha/quantize_recipe.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

namespace mha {

/// Options of `quantize_dynamic`: what it converts and how.
struct QuantizeOptions {
  /// The input and output projections of every `MultiheadAttention` (the
  /// packed `in_proj_weight` as one (3E, E) linear, or the separate
  /// `q/k/v_proj_weight`, and `out_proj`).
  TORCH_ARG(bool, attention) = true;
  /// Every other `torch::nn::Linear`: the Transformer layers' feed-forward
  /// `linear1`/`linear2`, and a model's own (an output projection).
  TORCH_ARG(bool, linears) = true;
  /// The quantization of weights and activations.
  TORCH_ARG(QuantizeRecipe, recipe) = QuantizeRecipe::kPerChannel;
};

/// Converts, in place and for inference, the float32 CPU projections of
/// `module` and of every module under it (`MultiheadAttention`, the
/// Transformer layers and stacks, `torch::nn::Linear`) to int8 weights
/// computed by FBGEMM (`quantized::linear_prepack`, `quantized::linear_dynamic`,
/// through PyTorch's dispatcher). Biases stay float32 and are added after the
/// int8 GEMM. A converted weight parameter keeps its name but holds no
/// elements (a float32 tensor of shape (0)): its int8 form is a child module
/// `<name>_int8`, and `state_dict` lists `<name>` (int8) and `<name>_scale`
/// (float64, one per output row, or one) in its place, so quantized modules
/// save and load; loading float32 weights into a quantized module quantizes
/// them. Converted weights are never computed in float again: to go back,
/// build a float module and load the float weights.
///
/// A quantized module computes in eval mode, without autograd, on float32
/// CPU inputs; anything else is a `c10::Error` at the call. `to()` another
/// dtype or device throws (the int8 weights' error comes from the first
/// quantized module `to()` reaches; modules it reached before are converted,
/// which with the default options is none). Call a quantized
/// `torch::nn::Linear` through `mha::linear` (LibTorch's `LinearImpl::forward`
/// cannot be redirected: it raises on the empty weight).
///
/// Throws `c10::Error`, changing nothing, for weights that are not float32
/// on the CPU, a tensor-parallel module, or a LibTorch without FBGEMM's ops
/// or whose quantized engine is not x86/fbgemm. Prepacked weights
/// (`mha::prepack`, and a model as `mha::load_hf_model` loads it) are
/// quantized from their float values; int8 weights are left as they are.
///
/// Example:
/// ```
/// mha::TransformerEncoderLayer layer(mha::TransformerLayerOptions(64, 4));
/// layer->eval();
/// mha::quantize_dynamic(*layer);
/// torch::NoGradGuard no_grad;
/// auto out = layer(torch::randn({10, 2, 64}));  // int8 projections
/// ```
void quantize_dynamic(torch::nn::Module& module, const QuantizeOptions& options = {});

/// `quantize_dynamic` of the module `module` holds.
template <typename ModuleType>
void quantize_dynamic(const torch::nn::ModuleHolder<ModuleType>& module,
                      const QuantizeOptions& options = {}) {
  TORCH_CHECK_VALUE(!module.is_empty(),
                    "quantize_dynamic: expected module to hold a module, but got an empty holder "
                    "(nullptr)");
  quantize_dynamic(*module.ptr(), options);
}

/// Whether `quantize_dynamic` converted any weight of `module` or of a module under it.
bool is_quantized(const torch::nn::Module& module);

/// `linear`'s forward, x (..., in) -> (..., out): on its int8 weight when
/// `quantize_dynamic` converted it, else `linear.forward(x)`.
torch::Tensor linear(const torch::nn::LinearImpl& linear, const torch::Tensor& x);

/// `linear` of the module `linear` holds.
inline torch::Tensor linear(const torch::nn::Linear& module, const torch::Tensor& x) {
  TORCH_CHECK_VALUE(!module.is_empty(),
                    "linear: expected module to hold a module, but got an empty holder (nullptr)");
  return linear(*module.ptr(), x);
}

}  // namespace mha
