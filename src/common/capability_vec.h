#pragma once

// Private: what every kernel body compiled once per capability
// (cmake/MhaCpuKernels.cmake) shares. Include it only from such a body: it is
// compiled with that capability's flags and CPU_CAPABILITY macro, so ATen's
// Vectorized<float> is that width there. Everything is in the inline namespace
// CPU_CAPABILITY, as ATen's own vec code: without it the objects' inline
// functions have one mangled name, and the linker keeps one of them for all.

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/macros/Macros.h>

#include <cmath>
#include <cstdint>

namespace mha {
namespace detail {
inline namespace CPU_CAPABILITY {

/// The float vector of this capability (16 lanes with AVX-512, 8 with AVX2).
using Vec = at::vec::Vectorized<float>;

/// The capability this object's body was compiled for: "DEFAULT", "AVX2", "AVX512".
inline const char* compiled_for() { return C10_STRINGIZE(CPU_CAPABILITY); }

/// scores[0, count) -> exp(score - max) in place; returns their sum. `kFastExp`
/// takes `exp_u20` (as ATen's flash attention) for the vector part, else `exp`.
template <bool kFastExp>
inline float exp_and_sum(float* scores, int64_t count, float max) {
  const Vec max_v(max);
  Vec sum_v(0.0f);
  int64_t j = 0;
  for (; j + Vec::size() <= count; j += Vec::size()) {
    const Vec shifted = Vec::loadu(scores + j) - max_v;
    const Vec e = kFastExp ? shifted.exp_u20() : shifted.exp();
    e.store(scores + j);
    sum_v = sum_v + e;
  }
  float sum = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, sum_v);
  for (; j < count; ++j) {
    scores[j] = std::exp(scores[j] - max);
    sum += scores[j];
  }
  return sum;
}

}  // namespace CPU_CAPABILITY
}  // namespace detail
}  // namespace mha
