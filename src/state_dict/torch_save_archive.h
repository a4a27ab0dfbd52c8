#pragma once

// Private: the parts of reading a torch.save archive (torch_save_reader.cpp)
// that the reader of whole tensors and the one of slices share: opening it,
// checking a storage's record, and naming the tensors of its data.pkl.

#include <caffe2/serialize/inline_container.h>

#include <cstdint>
#include <memory>
#include <string>

#include "state_dict/formats.h"
#include "state_dict/pickle_reader.h"

namespace mha {
namespace detail {

/// Opens the archive and checks its byte order; throws `c10::Error`
/// starting with `path`.
std::unique_ptr<caffe2::serialize::PyTorchStreamReader> open_torch_save(const std::string& path);

/// The record data/<key> of a storage of `numel` elements of `dtype`, and the
/// storage's bytes, checked against the bytes the record holds (which cannot
/// exceed the file's: torch.save stores records uncompressed). Throws
/// "corrupt pickle: ..." otherwise.
struct StorageRecord {
  std::string name;
  uint64_t nbytes;
};
StorageRecord storage_record(caffe2::serialize::PyTorchStreamReader& reader,
                             uint64_t file_size,
                             const std::string& key,
                             c10::ScalarType dtype,
                             int64_t numel);

/// Reads data.pkl, its storages from `load_storage`, and names its tensors
/// (tensor_names.h). Throws `c10::Error` starting with `path`.
ReadResult read_archive_tensors(const std::string& path,
                                caffe2::serialize::PyTorchStreamReader& reader,
                                const StorageLoader& load_storage);

}  // namespace detail
}  // namespace mha
