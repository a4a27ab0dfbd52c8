#pragma once

// Weights files for the tests: the checkpoints Python wrote (the CTest fixture
// state_dict_checkpoints, in MHA_STATE_DICT_FIXTURES) and byte-level builders
// of torch.save archives, pickles and safetensors files, valid or corrupt.

#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "file_bytes.h"

namespace mha {
namespace test {

/// A checkpoint written by scripts/export_test_checkpoints.py.
inline std::string fixture(const std::string& name) {
  const std::string path = std::string(MHA_STATE_DICT_FIXTURES) + "/" + name;
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << path << " is missing; run the CTest fixture (ctest -R state_dict) or "
                  << "python scripts/export_test_checkpoints.py --out " << MHA_STATE_DICT_FIXTURES;
  }
  return path;
}

/// A fresh folder for a test's own files: MHA_STATE_DICT_FIXTURES/scratch/<name>.
inline std::string scratch_dir(const std::string& name) {
  const auto dir = std::filesystem::path(MHA_STATE_DICT_FIXTURES) / "scratch" / name;
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline std::string read_bytes(const std::string& path) {
  const std::vector<char> bytes = mha::support::read_file_bytes(path);
  return std::string(bytes.begin(), bytes.end());
}

inline std::string write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  return path;
}

/// A little-endian u64, as the safetensors size field.
inline std::string u64(uint64_t value) {
  return std::string(reinterpret_cast<const char*>(&value), 8);
}

inline std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return u64(header.size()) + header + data;
}

/// A torch.save-style archive with `pickle` as data.pkl and `records` as data/<key>.
inline std::string torch_archive(const std::string& path,
                                 const std::string& pickle,
                                 const std::map<std::string, std::string>& records = {}) {
  caffe2::serialize::PyTorchStreamWriter writer(path);
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  writer.writeRecord("byteorder", "little", 6);
  for (const auto& [key, bytes] : records) {
    writer.writeRecord("data/" + key, bytes.data(), bytes.size());
  }
  writer.writeEndOfFile();
  return path;
}

/// Pickle BINUNICODE of `s`.
inline std::string binunicode(const std::string& s) {
  const auto n = static_cast<uint32_t>(s.size());
  return "X" + std::string(reinterpret_cast<const char*>(&n), 4) + s;
}

/// Pickle of {"a": tensor} where the tensor is a float32 view (offset, size,
/// stride) of storage '0' that claims `numel` elements.
inline std::string tensor_pickle(int numel, int offset, int size, int stride) {
  auto int1 = [](int v) { return std::string("K") + static_cast<char>(v); };
  return std::string("\x80\x02}") + binunicode("a") + "ctorch._utils\n_rebuild_tensor_v2\n((" +
         binunicode("storage") + "ctorch\nFloatStorage\n" + binunicode("0") + binunicode("cpu") +
         int1(numel) + "tQ" + int1(offset) + int1(size) + "\x85" + int1(stride) + "\x85\x89}tRs.";
}

}  // namespace test
}  // namespace mha
