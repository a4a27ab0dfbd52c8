#include "common/cpu_capability.h"

namespace mha {
namespace detail {

bool cpu_runs(CpuCapability capability) {
#if defined(MHA_CPU_KERNELS_X86)
  switch (capability) {
    case CpuCapability::kDefault:
      return true;
    case CpuCapability::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CpuCapability::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }
  return false;
#else
  return capability == CpuCapability::kDefault;
#endif
}

std::vector<CpuCapability> available_cpu_capabilities() {
  std::vector<CpuCapability> available;
  for (CpuCapability c : {CpuCapability::kDefault, CpuCapability::kAvx2, CpuCapability::kAvx512}) {
    if (cpu_runs(c)) available.push_back(c);
  }
  return available;
}

CpuCapability best_cpu_capability() {
  static const CpuCapability best = available_cpu_capabilities().back();
  return best;
}

bool cpu_is_amd() {
#if defined(MHA_CPU_KERNELS_X86)
  return __builtin_cpu_is("amd");
#else
  return false;
#endif
}

const char* capability_name(CpuCapability capability) {
  static constexpr const char* kNames[] = {"default", "avx2", "avx512"};  // in the enum's order
  return kNames[static_cast<int>(capability)];
}

}  // namespace detail
}  // namespace mha
