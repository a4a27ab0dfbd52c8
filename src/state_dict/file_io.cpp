#include "state_dict/file_io.h"

#include "state_dict/errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace mha {
namespace detail {
namespace {

/// Opens `path` for reading after checking it is an existing regular file.
std::ifstream open_for_reading(const std::string& path, size_t* file_size) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) {
    fail_file(path, "no such file");
  }
  if (std::filesystem::is_directory(status)) {
    fail_file(path, "is a directory, not a weights file");
  }
  const auto size = std::filesystem::file_size(path, error);
  if (error) {
    fail_file(path, fmt::format("cannot get the file size: {}", error.message()));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fail_file(path, "cannot be opened for reading");
  }
  *file_size = static_cast<size_t>(size);
  return in;
}

}  // namespace

std::vector<char> read_file_bytes(const std::string& path) {
  size_t size = 0;
  auto in = open_for_reading(path, &size);
  std::vector<char> bytes(size);
  if (size > 0 && !in.read(bytes.data(), static_cast<std::streamsize>(size))) {
    fail_file(path, fmt::format("read error after {} of {} bytes", in.gcount(), size));
  }
  return bytes;
}

std::vector<char> read_file_head(const std::string& path, size_t max_bytes, size_t* file_size) {
  auto in = open_for_reading(path, file_size);
  std::vector<char> bytes(std::min(max_bytes, *file_size));
  if (!bytes.empty() && !in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    fail_file(path, "read error");
  }
  return bytes;
}

void write_file_bytes(const std::string& path, const std::vector<std::string_view>& parts) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    fail_file(path, "cannot be opened for writing");
  }
  for (const auto part : parts) {
    out.write(part.data(), static_cast<std::streamsize>(part.size()));
  }
  out.close();
  if (!out) {
    fail_file(path, "write error");
  }
}

}  // namespace detail
}  // namespace mha
