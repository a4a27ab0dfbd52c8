#pragma once

// Private: mha's own float32 GEMM for a few rows, on weights laid out in
// panels of 16 output features (`to_panels`). oneDNN's GEMM on its packed
// layout is built for many rows; at the one to a few dozen rows of a decode
// step it reads the weights well below the memory's speed
// (bench/results/panel-gemm-2026-12-04.md: this GEMM takes 0.3-0.9x its
// time at 1-16 rows, 0.76-0.99x at 64). A panel here is (in, 16): for
// each input feature the weights of 16 output features side by side, so a
// call streams each panel once, front to back, while a tile of input rows
// accumulates in vector registers. Compiled once per CPU capability (scalar,
// AVX2, AVX-512: panel_gemm_<capability>.cpp, from panel_gemm_kernel.h); the
// best one this CPU runs is chosen at run time.

#include <torch/types.h>

#include <cstdint>

#include "common/cpu_capability.h"
#include "linear/fused_activation.h"
#include "linear/panel_gemm/panel_gemm_args.h"

namespace mha {
namespace detail {

/// weight (out, in) float32 -> panels (ceil(out / 16), in, 16): panel p
/// holds output features [16p, 16p + 16) (zeros past `out`).
torch::Tensor to_panels(const torch::Tensor& weight);
/// `to_panels`' inverse: the (out, in) weight, bit for bit.
torch::Tensor from_panels(const torch::Tensor& panels, int64_t out);

/// x (M, in) float32 CPU times the (out, in) weight of `panels`, transposed,
/// plus `bias` (out) where defined, then `activation`: (M, out). Every output
/// element sums its products in one fixed order (blocks of 256 input features,
/// each in input order from zero, the blocks' sums in order), then adds its
/// bias, whatever M, the row's place among them and the thread count: a row's
/// result depends on nothing but that row (batch invariant by construction).
torch::Tensor panel_gemm(const torch::Tensor& x,
                         const torch::Tensor& panels,
                         int64_t out,
                         const torch::Tensor& bias,
                         FusedActivation activation = FusedActivation::kNone);
/// The same with the kernel compiled for `capability` (tests compare them);
/// throws unless this CPU runs it.
torch::Tensor panel_gemm(const torch::Tensor& x,
                         const torch::Tensor& panels,
                         int64_t out,
                         const torch::Tensor& bias,
                         FusedActivation activation,
                         CpuCapability capability);

}  // namespace detail
}  // namespace mha
