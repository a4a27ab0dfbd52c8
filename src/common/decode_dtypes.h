#pragma once

// Private: the dtypes and devices the decode attention kernel
// (attention/paged_decode/) reads, the one fact that the plan (which kernel
// a call takes) and the dense cache (whether a reorder may keep a row map for
// that kernel to read through) both ask.

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

namespace mha {
namespace detail {

/// Whether the decode kernel reads `dtype` on `device`: float32 or bfloat16 on the CPU.
inline bool decode_kernel_reads(c10::ScalarType dtype, c10::Device device) {
  return device.is_cpu() && (dtype == c10::ScalarType::Float || dtype == c10::ScalarType::BFloat16);
}

}  // namespace detail
}  // namespace mha
