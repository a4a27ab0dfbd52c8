#include "dtype_names.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <array>
#include <utility>

namespace mha {
namespace support {

namespace {

constexpr std::array<std::pair<const char*, c10::ScalarType>, 4> kDtypeNames{{
    {"float16", c10::ScalarType::Half},
    {"bfloat16", c10::ScalarType::BFloat16},
    {"float32", c10::ScalarType::Float},
    {"float64", c10::ScalarType::Double},
}};

}  // namespace

c10::ScalarType dtype_from_name(const std::string& name) {
  for (const auto& [known, dtype] : kDtypeNames) {
    if (name == known) return dtype;
  }
  TORCH_CHECK_VALUE(false, fmt::format("unknown dtype '{}': expected float16, bfloat16, float32 "
                                       "or float64",
                                       name));
}

std::string dtype_name(c10::ScalarType dtype) {
  for (const auto& [known, candidate] : kDtypeNames) {
    if (dtype == candidate) return known;
  }
  TORCH_CHECK_VALUE(false, fmt::format("no reference dtype name for {}: expected float16, "
                                       "bfloat16, float32 or float64",
                                       c10::toString(dtype)));
}

}  // namespace support
}  // namespace mha
