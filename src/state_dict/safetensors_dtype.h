#pragma once

// The dtype names of the safetensors format and their exact torch equivalents.

#include <c10/core/ScalarType.h>

#include <optional>
#include <string>

namespace mha {
namespace detail {

/// The torch dtype of a safetensors dtype name ("F32", "BF16", ...), or
/// nullopt for a name without an exact equivalent.
std::optional<c10::ScalarType> safetensors_to_dtype(const std::string& name);

/// The safetensors name of a torch dtype, or nullopt when it has none.
std::optional<std::string> dtype_to_safetensors(c10::ScalarType dtype);

}  // namespace detail
}  // namespace mha
