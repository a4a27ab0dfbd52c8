#pragma once

// Private: the instruction sets mha's own kernels are compiled for (one object
// per capability, cmake/MhaCpuKernels.cmake) and which of them this CPU runs.

#include <vector>

namespace mha {
namespace detail {

/// The instruction sets a kernel is compiled for.
enum class CpuCapability { kDefault, kAvx2, kAvx512 };

/// Whether this build has and this CPU runs code built for `capability`.
bool cpu_runs(CpuCapability capability);

/// The capabilities this build has and this CPU runs, the best last.
std::vector<CpuCapability> available_cpu_capabilities();

/// The best of `available_cpu_capabilities()` (read once).
CpuCapability best_cpu_capability();

/// "default", "avx2" or "avx512".
const char* capability_name(CpuCapability capability);

}  // namespace detail
}  // namespace mha
