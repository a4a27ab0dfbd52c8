#pragma once

// Private: the checked `layer(i)` of the stacks' cache objects.

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>

namespace mha {
namespace detail {

/// `layers[i]`; an index outside [0, layers.size()) is a c10::IndexError
/// naming the range and the index.
template <typename Layers>
auto& layer_at(Layers& layers, int64_t i) {
  const auto n = static_cast<int64_t>(layers.size());
  TORCH_CHECK_INDEX(i >= 0 && i < n,
                    fmt::format("layer index must be in [0, {}), but got {}", n, i));
  return layers[static_cast<size_t>(i)];
}

}  // namespace detail
}  // namespace mha
