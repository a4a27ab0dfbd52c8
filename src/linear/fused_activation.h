#pragma once

// Private: the activations a converted weight's GEMM may apply in its
// epilogue (oneDNN's post-ops on prepacked weights, the panel GEMM's tiles).
// No LibTorch header: the CPU kernels' objects include it
// (`apply_fused_activation.h` applies one to a tensor).

namespace mha {
namespace detail {

/// An activation fused into a GEMM, or none.
enum class FusedActivation { kNone, kReLU, kGELU };

}  // namespace detail
}  // namespace mha
