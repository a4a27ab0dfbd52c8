#pragma once

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <ostream>
#include <utility>
#include <vector>

namespace mha {

/// Options for `mha::LayerNorm`, with the names and defaults of Python's
/// `torch.nn.LayerNorm(normalized_shape, eps, elementwise_affine, bias)`.
struct LayerNormOptions {
  /// The trailing dimensions to normalise over.
  /* implicit */ LayerNormOptions(std::vector<int64_t> normalized_shape);

  /// The trailing dimensions to normalise over.
  TORCH_ARG(std::vector<int64_t>, normalized_shape);
  /// Added to the variance for numerical stability.
  TORCH_ARG(double, eps) = 1e-5;
  /// Learn a per-element `weight` (ones) and, with `bias`, a `bias` (zeros).
  TORCH_ARG(bool, elementwise_affine) = true;
  /// Learn a `bias`; Python's `bias=False` (LibTorch's LayerNorm has no such option).
  TORCH_ARG(bool, bias) = true;
};

/// Python's `torch.nn.LayerNorm`, including `bias=False`: the parameters are
/// `weight` and `bias` as in Python, and `bias` is absent from
/// `named_parameters()` without a bias, so Python's `state_dict()` keys
/// (`norm1.weight` alone) load strictly.
class LayerNormImpl : public torch::nn::Cloneable<LayerNormImpl> {
 public:
  /// Same as `LayerNormImpl(LayerNormOptions(normalized_shape))`.
  explicit LayerNormImpl(std::vector<int64_t> normalized_shape)
      : LayerNormImpl(LayerNormOptions(std::move(normalized_shape))) {}
  /// Registers `weight` and `bias` (undefined when absent) and initialises them.
  explicit LayerNormImpl(LayerNormOptions options_) : options(std::move(options_)) { reset(); }

  /// `at::layer_norm(input, normalized_shape, weight, bias, eps)`, as Python's
  /// `F.layer_norm`. input (..., *normalized_shape) -> same shape.
  torch::Tensor forward(const torch::Tensor& input);

  /// Registers the parameters and initialises them.
  void reset() override;
  /// `weight` to ones, `bias` to zeros, as Python's `reset_parameters`.
  void reset_parameters();
  /// Prints e.g. `mha::LayerNorm([8], eps=1e-05, elementwise_affine=true, bias=false)`.
  void pretty_print(std::ostream& stream) const override;

  /// The options this module was constructed with.
  LayerNormOptions options;
  /// Per-element scale, or undefined without `elementwise_affine`.
  torch::Tensor weight;
  /// Per-element shift, or undefined without `elementwise_affine` or `bias`.
  torch::Tensor bias;
};

/// A `ModuleHolder` for `LayerNormImpl`.
TORCH_MODULE(LayerNorm);

}  // namespace mha
