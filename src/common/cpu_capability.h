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

/// Whether this CPU is AMD's (x86-64; false elsewhere): its AVX-512 (Zen 4)
/// runs each 512-bit operation as two 256-bit halves, so oneDNN's AVX-512
/// GEMM has no lead there over mha's panels (`default_packed_layout`).
bool cpu_is_amd();

/// "default", "avx2" or "avx512".
const char* capability_name(CpuCapability capability);

}  // namespace detail
}  // namespace mha

/// Declares the entries of a kernel compiled once per capability
/// (cmake/MhaCpuKernels.cmake): `prefix`_default, `prefix`_avx2 and
/// `prefix`_avx512, each `void` taking the parameters `...`, and each one's
/// `_compiled_for()`: the capability its body was compiled for ("DEFAULT",
/// "AVX2", "AVX512"), from inside that body.
#define MHA_DECLARE_CAPABILITY_ENTRIES(prefix, ...) \
  void prefix##_default(__VA_ARGS__);               \
  void prefix##_avx2(__VA_ARGS__);                  \
  void prefix##_avx512(__VA_ARGS__);                \
  const char* prefix##_default_compiled_for();      \
  const char* prefix##_avx2_compiled_for();         \
  const char* prefix##_avx512_compiled_for()

/// The entry `prefix`_<capability>`suffix` that `capability` names; off
/// x86-64, where only the default objects are built, the default one.
#if defined(MHA_CPU_KERNELS_X86)
#define MHA_CAPABILITY_ENTRY(capability, prefix, suffix)                           \
  ((capability) == ::mha::detail::CpuCapability::kAvx512 ? prefix##_avx512##suffix \
   : (capability) == ::mha::detail::CpuCapability::kAvx2 ? prefix##_avx2##suffix   \
                                                         : prefix##_default##suffix)
#else
#define MHA_CAPABILITY_ENTRY(capability, prefix, suffix) prefix##_default##suffix
#endif

/// Defines, in one capability object of a kernel (cmake/MhaCpuKernels.cmake),
/// the entry `name`: `void name parameters`, which calls `kernel::run
/// arguments`; and `name`_compiled_for: `compiled_for()` (common/capability_vec.h),
/// the capability that object was compiled for.
#define MHA_DEFINE_CAPABILITY_ENTRY(name, kernel, parameters, arguments) \
  void mha::detail::name parameters { kernel::run arguments; }           \
  const char* mha::detail::name##_compiled_for() { return compiled_for(); }

/// `MHA_DEFINE_CAPABILITY_ENTRY` of a kernel that runs the items [begin, end)
/// of one `Args` (`kernel::run(args, begin, end)`).
#define MHA_DEFINE_RANGE_CAPABILITY_ENTRY(name, kernel, Args)                               \
  MHA_DEFINE_CAPABILITY_ENTRY(name, kernel, (const Args& args, int64_t begin, int64_t end), \
                              (args, begin, end))
