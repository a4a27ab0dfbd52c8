#pragma once

// Private: a fused activation applied after a GEMM that cannot fuse it.

#include <ATen/ATen.h>

#include "linear/fused_activation.h"

namespace mha {
namespace detail {

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
