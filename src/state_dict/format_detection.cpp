#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>

#include <cstdint>
#include <cstring>

#include "state_dict/errors.h"
#include "state_dict/file_io.h"
#include "state_dict/formats.h"

namespace mha {
namespace detail {
namespace {

constexpr size_t kHeadBytes = 16;

bool starts_with(const std::vector<char>& head, const char* magic, size_t n) {
  return head.size() >= n && std::memcmp(head.data(), magic, n) == 0;
}

std::string hex_bytes(const std::vector<char>& head) {
  std::string out;
  for (size_t i = 0; i < head.size() && i < 8; ++i) {
    out += fmt::format("{}{:02x}", i == 0 ? "" : " ", static_cast<uint8_t>(head[i]));
  }
  return out;
}

}  // namespace

const char* format_name(FileFormat format) {
  static constexpr const char* kNames[] = {"torch.save archive", "TorchScript archive",
                                           "safetensors file"};  // in the enum's order
  return kNames[static_cast<int>(format)];
}

FileFormat detect_format(const std::string& path) {
  uint64_t size = 0;
  const auto head = read_file_head(path, kHeadBytes, &size);
  if (size == 0) {
    fail_file(path, "empty file, not a weights file");
  }
  // Zip local file header (a torch.save or torch.jit.save archive), or the end
  // of central directory record of an empty zip.
  if (starts_with(head, "PK\x03\x04", 4) || starts_with(head, "PK\x05\x06", 4)) {
    auto reader = with_file_context(path, "not a readable zip archive", [&] {
      return std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
    });
    const bool script = reader->hasRecord("constants.pkl");
    const bool pickle = reader->hasRecord("data.pkl");
    if (script) {
      return FileFormat::kTorchScript;
    }
    if (!pickle) {
      fail_file(path,
                "zip archive without data.pkl: neither a torch.save nor a TorchScript archive");
    }
    return FileFormat::kTorchSave;
  }
  // safetensors: little-endian u64 header size, then the JSON header's '{'.
  if (head.size() >= 9 && head[8] == '{') {
    return FileFormat::kSafetensors;
  }
  // Pickle protocol 2 at offset 0: torch.save's legacy format.
  if (starts_with(head, "\x80\x02", 2)) {
    fail_file(path,
              "legacy torch.save format (PyTorch < 1.6 or _use_new_zipfile_serialization=False) is "
              "not supported; re-save it with torch.save from PyTorch 1.6 or later");
  }
  fail_file(path, fmt::format("unrecognised weights format ({} bytes, starting {}): expected a "
                              "torch.save archive, a TorchScript archive or a .safetensors file",
                              size, hex_bytes(head)));
}

}  // namespace detail
}  // namespace mha
