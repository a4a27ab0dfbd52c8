#pragma once

// Python's names of the floating dtypes that reference files, bundles and
// command lines use ("float32" for torch.float32): the one map of the project.

#include <c10/core/ScalarType.h>

#include <string>

namespace mha {
namespace support {

/// The dtype Python calls `torch.<name>`: float16, bfloat16, float32 or
/// float64. Throws c10::Error naming `name` and the names known.
c10::ScalarType dtype_from_name(const std::string& name);

/// Python's name of `dtype` without `torch.` ("float32"). Throws c10::Error
/// for a dtype outside the four floating ones.
std::string dtype_name(c10::ScalarType dtype);

}  // namespace support
}  // namespace mha
