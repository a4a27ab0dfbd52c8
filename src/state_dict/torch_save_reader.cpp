// Reads `torch.save` zip archives (PyTorch 1.6+): LibTorch's zip reader
// (PyTorchStreamReader) for the records, our weights-only pickle reader
// (pickle_reader.h) for data.pkl, then the naming rules (tensor_names.h).

#include <c10/core/CPUAllocator.h>
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "state_dict/errors.h"
#include "state_dict/formats.h"
#include "state_dict/tensor_names.h"
#include "state_dict/torch_save_archive.h"

namespace mha {
namespace detail {
namespace {

using caffe2::serialize::PyTorchStreamReader;

void check_byte_order(const std::string& path, PyTorchStreamReader& reader) {
  if (!reader.hasRecord("byteorder")) {
    return;  // archives before PyTorch 1.10 are little-endian
  }
  const auto [data, size] = with_file_context(path, "corrupt record 'byteorder'",
                                              [&] { return reader.getRecord("byteorder"); });
  const std::string order(static_cast<const char*>(data.get()), size);
  if (order != "little") {
    fail_file(path, fmt::format("byte order '{}' is not supported (only little-endian)", order));
  }
}

}  // namespace

std::unique_ptr<PyTorchStreamReader> open_torch_save(const std::string& path) {
  auto reader = with_file_context(path, "not a readable zip archive",
                                  [&] { return std::make_unique<PyTorchStreamReader>(path); });
  check_byte_order(path, *reader);
  return reader;
}

StorageRecord storage_record(PyTorchStreamReader& reader,
                             uint64_t file_size,
                             const std::string& key,
                             c10::ScalarType dtype,
                             int64_t numel) {
  StorageRecord record{"data/" + key, 0};
  if (!reader.hasRecord(record.name)) {
    pickle_corrupt(fmt::format("storage '{}': the archive has no record '{}'", key, record.name));
  }
  const size_t record_bytes = reader.getRecordSize(record.name);
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), c10::elementSize(dtype),
                             &record.nbytes) ||
      record.nbytes > record_bytes || record_bytes > file_size) {
    pickle_corrupt(
        fmt::format("storage '{}' claims {} elements of {} but its record '{}' holds "
                    "{} bytes (file: {} bytes)",
                    key, numel, c10::toString(dtype), record.name, record_bytes, file_size));
  }
  return record;
}

ReadResult read_archive_tensors(const std::string& path,
                                PyTorchStreamReader& reader,
                                const StorageLoader& load_storage) {
  const auto pickle_record = with_file_context(path, "corrupt record 'data.pkl'",
                                               [&] { return reader.getRecord("data.pkl"); });
  const std::string_view pickle(static_cast<const char*>(std::get<0>(pickle_record).get()),
                                std::get<1>(pickle_record));
  ValueArena arena(/*copy_budget=*/pickle.size());
  ReadResult out;
  with_file_context(path, "data.pkl", [&] {
    const Value* root = read_weights_pickle(pickle, load_storage, arena);
    name_tensors(*root, pickle.size(), out);
  });
  return out;
}

ReadResult read_torch_save(const std::string& path) {
  const auto reader = open_torch_save(path);
  const uint64_t file_size = std::filesystem::file_size(path);
  // persistent_load: the record as a storage of the bytes the pickle claims.
  const StorageLoader loader = [&](const std::string& key, c10::ScalarType dtype, int64_t numel) {
    const StorageRecord record = storage_record(*reader, file_size, key, dtype, numel);
    auto [data, size] = reader->getRecord(record.name);
    return c10::Storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(record.nbytes),
                        std::move(data), /*allocator=*/nullptr, /*resizable=*/false);
  };
  return read_archive_tensors(path, *reader, loader);
}

}  // namespace detail
}  // namespace mha
