#pragma once

// Private: a weights file opened to read boxes (rows, columns) of its tensors
// without reading the rest, for the tensor-parallel load. safetensors files
// and torch.save archives (whose records are stored, not compressed) read
// only the bytes of the box; TorchScript archives are read whole first.

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "state_dict/formats.h"

namespace mha {
namespace detail {

/// A weights file whose tensors are read a box at a time.
class SliceReader {
 public:
  virtual ~SliceReader() = default;

  /// The file's tensors by the naming rules of `read_state_dict`, with their
  /// dtypes and shapes; meta tensors where the format streams.
  const TensorMap& tensors() const { return tensors_; }

  /// The paths `read_state_dict_with_report` reports as skipped.
  const std::vector<std::string>& skipped() const { return skipped_; }

  /// Reads the box of `tensor` (one of `tensors()`) that starts at `begin`
  /// and has `out`'s sizes into `out` (contiguous, of `tensor`'s dtype).
  /// Throws `c10::Error` starting with the file's path.
  virtual void read(const torch::Tensor& tensor, c10::IntArrayRef begin, torch::Tensor& out) = 0;

 protected:
  TensorMap tensors_;
  std::vector<std::string> skipped_;
};

/// Opens `path`, a file of any format `read_state_dict` reads (detected from
/// the content), and reads its tensors' names, dtypes and shapes (the whole
/// archive for TorchScript). Throws as `read_state_dict`.
std::unique_ptr<SliceReader> open_slice_reader(const std::string& path);

/// Reads `n` bytes at byte `offset` of a tensor's storage into `destination`.
using ByteReader = std::function<void(uint64_t offset, void* destination, size_t n)>;

/// Copies the box of a strided tensor `view` (its sizes, strides and storage
/// offset; the data is reached through `read_bytes`) that starts at `begin`
/// into `out` (contiguous, `view`'s dtype and the box's sizes), one
/// contiguous run of bytes at a time.
void read_box(const torch::Tensor& view,
              c10::IntArrayRef begin,
              torch::Tensor& out,
              const ByteReader& read_bytes);

/// slice_reader.cpp: a reader over tensors already in memory.
std::unique_ptr<SliceReader> in_memory_slice_reader(TensorMap tensors,
                                                    std::vector<std::string> skipped);
/// safetensors_slices.cpp
std::unique_ptr<SliceReader> safetensors_slice_reader(const std::string& path);
/// torch_save_slices.cpp
std::unique_ptr<SliceReader> torch_save_slice_reader(const std::string& path);

}  // namespace detail
}  // namespace mha
