#pragma once

// A whole file read into memory with one read: the reference files of the
// tests are megabytes, and a byte-at-a-time iterator takes seconds per file
// under AddressSanitizer.

#include <c10/util/Exception.h>

#include <fstream>
#include <string>
#include <vector>

namespace mha {
namespace support {

/// The bytes of the file at `path`; a c10::Error naming the path when it cannot be read.
inline std::vector<char> read_file_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  TORCH_CHECK(file, "cannot open ", path);
  std::vector<char> bytes(static_cast<size_t>(file.tellg()));
  file.seekg(0);
  TORCH_CHECK(file.read(bytes.data(), static_cast<std::streamsize>(bytes.size())),
              "cannot read the ", bytes.size(), " bytes of ", path);
  return bytes;
}

}  // namespace support
}  // namespace mha
