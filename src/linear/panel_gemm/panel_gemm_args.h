#pragma once

// Private: the panel GEMM's operands as its kernels read them, and the
// kernels' entries, one per CPU capability object (panel_gemm.h is the
// GEMM's tensor interface). No LibTorch header: the kernels' objects, built
// without a precompiled header, include it (<torch/types.h> alone took 7.6 s
// of each object's 9.9 s compile).

#include <cstdint>

#include "common/cpu_capability.h"
#include "linear/fused_activation.h"

namespace mha {
namespace detail {

/// Output features per panel.
inline constexpr int64_t kPanelWidth = 16;
/// Panels per unit of work: a thread's share is whole groups.
inline constexpr int64_t kPanelGroup = 4;

/// One call's operands as the kernels read them.
struct PanelGemmArgs {
  const float* x;       ///< (rows, in), contiguous
  const float* panels;  ///< (panel_count, in, 16), contiguous
  const float* bias;    ///< (panel_count * 16) or nullptr
  float* y;             ///< (rows, panel_count * 16), contiguous
  int64_t rows, in, panel_count;
  FusedActivation activation;  ///< applied to each output after its bias
};

/// The kernels, one per capability object: panel groups [begin, end).
MHA_DECLARE_CAPABILITY_ENTRIES(panel_gemm, const PanelGemmArgs& args, int64_t begin, int64_t end);
/// What the kernel that `capability` runs was compiled for.
const char* panel_gemm_compiled_for(CpuCapability capability);

}  // namespace detail
}  // namespace mha
