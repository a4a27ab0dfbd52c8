#pragma once

// Private: the checked header of a `.safetensors` file (safetensors_reader.cpp),
// for the reader of whole tensors and for the one of slices.

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "state_dict/file_io.h"

namespace mha {
namespace detail {

/// One tensor of the header: its bytes are [begin, end) after the header.
struct SafetensorsEntry {
  std::string name;
  c10::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

/// The header's tensors, each checked against the file as the reference
/// implementation checks them, and the file offset where their data starts.
struct SafetensorsIndex {
  std::vector<SafetensorsEntry> entries;
  uint64_t data_start = 0;
};

/// Reads and checks the header of `file`; throws `c10::Error` starting with
/// the file's path.
SafetensorsIndex read_safetensors_index(InputFile& file);

/// Throws `c10::Error` "<path>: tensor '<name>' of dtype BOOL holds byte ..."
/// unless every byte of `data` is 0 or 1.
void check_bool_bytes(const std::string& path,
                      const std::string& name,
                      const void* data,
                      size_t bytes);

}  // namespace detail
}  // namespace mha
