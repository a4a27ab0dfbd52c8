#include "state_dict/file_io.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "state_dict/errors.h"

namespace mha {
namespace detail {

InputFile::InputFile(const std::string& path) : path_(path) {
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
  size_ = static_cast<uint64_t>(size);
  in_.open(path, std::ios::binary);
  if (!in_) {
    fail_file(path, "cannot be opened for reading");
  }
}

void InputFile::read_at(uint64_t offset, void* destination, size_t n) {
  if (n == 0) {
    return;
  }
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(offset));
  in_.read(static_cast<char*>(destination), static_cast<std::streamsize>(n));
  if (!in_ || static_cast<size_t>(in_.gcount()) != n) {
    fail_file(path_,
              fmt::format("read error: {} bytes at offset {} (file size {})", n, offset, size_));
  }
}

std::vector<char> read_file_head(const std::string& path, size_t max_bytes, uint64_t* file_size) {
  InputFile file(path);
  *file_size = file.size();
  std::vector<char> bytes(static_cast<size_t>(std::min<uint64_t>(max_bytes, file.size())));
  file.read_at(0, bytes.data(), bytes.size());
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
