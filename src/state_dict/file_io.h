#pragma once

// Whole-file reads and writes with errors that name the file.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mha {
namespace detail {

/// The bytes of `path`; throws `c10::Error` "<path>: no such file" (or "is a
/// directory", "cannot be read").
std::vector<char> read_file_bytes(const std::string& path);

/// The first `max_bytes` bytes of `path` (fewer if the file is shorter), and
/// the file size; same errors as `read_file_bytes`.
std::vector<char> read_file_head(const std::string& path, size_t max_bytes, size_t* file_size);

/// Writes `parts` one after another to `path`, replacing it; throws
/// `c10::Error` naming the file when it cannot be written.
void write_file_bytes(const std::string& path, const std::vector<std::string_view>& parts);

}  // namespace detail
}  // namespace mha
