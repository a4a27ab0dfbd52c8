#pragma once

// Private helper: shapes in error messages, printed as `[2, 3]`.

#include <c10/util/ArrayRef.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <string>

namespace mha {
namespace detail {

/// `[d0, d1, ...]` for a tensor's sizes or an expected shape.
inline std::string shape_str(c10::ArrayRef<int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape.begin(), shape.end(), ", "));
}

}  // namespace detail
}  // namespace mha
