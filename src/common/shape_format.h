#pragma once

// Private: shapes in error messages, printed as Python prints them, so that
// messages that are Python's read exactly as Python's.

#include <c10/util/ArrayRef.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <string>

namespace mha {
namespace detail {

/// A Python tuple of ints, as Python prints an expected shape: `(2, 3)`, `(4,)`, `()`.
inline std::string python_tuple(c10::ArrayRef<int64_t> shape) {
  if (shape.size() == 1) {
    return fmt::format("({},)", shape[0]);
  }
  return fmt::format("({})", fmt::join(shape.begin(), shape.end(), ", "));
}

/// A tensor's shape as Python prints `tensor.shape`: `torch.Size([2, 3])`.
inline std::string torch_size(c10::ArrayRef<int64_t> shape) {
  return fmt::format("torch.Size([{}])", fmt::join(shape.begin(), shape.end(), ", "));
}

}  // namespace detail
}  // namespace mha
