#pragma once

// File reads and writes with errors that name the file.

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace mha {
namespace detail {

/// A regular file opened for reading. Throws `c10::Error` "<path>: no such
/// file" (or "is a directory", "cannot be opened for reading") on
/// construction, and "<path>: read error ..." when fewer bytes than asked for
/// can be read.
class InputFile {
 public:
  explicit InputFile(const std::string& path);

  /// The size of the file when it was opened.
  uint64_t size() const { return size_; }

  /// Reads `n` bytes at `offset` into `destination`.
  void read_at(uint64_t offset, void* destination, size_t n);

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t size_ = 0;
};

/// The first `max_bytes` bytes of `path` (fewer if the file is shorter), and
/// the file size; same errors as `InputFile`.
std::vector<char> read_file_head(const std::string& path, size_t max_bytes, uint64_t* file_size);

/// Writes `parts` one after another to `path`, replacing it; throws
/// `c10::Error` naming the file when it cannot be written.
void write_file_bytes(const std::string& path, const std::vector<std::string_view>& parts);

}  // namespace detail
}  // namespace mha
