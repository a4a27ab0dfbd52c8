#pragma once

// Private: the activations a converted weight's GEMM may apply in its
// epilogue (oneDNN's post-ops on prepacked weights), and the same activation
// applied after a GEMM that cannot fuse it.

#include <ATen/ATen.h>

namespace mha {
namespace detail {

/// An activation fused into a GEMM, or none.
enum class FusedActivation { kNone, kReLU, kGELU };

/// `activation` applied to `x` in place (ReLU; GELU exact, with erf, as
/// at::gelu's default): x.
inline at::Tensor apply_fused_activation(FusedActivation activation, at::Tensor x) {
  switch (activation) {
    case FusedActivation::kReLU:
      return x.relu_();
    case FusedActivation::kGELU:
      return at::gelu_(x);
    case FusedActivation::kNone:
      break;
  }
  return x;
}

}  // namespace detail
}  // namespace mha
