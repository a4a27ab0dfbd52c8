// Reads `torch.save` zip archives (PyTorch 1.6+): LibTorch's zip reader
// (PyTorchStreamReader) for the records, our weights-only pickle reader
// (pickle_reader.h) for data.pkl, then the naming rules (tensor_names.h).

#include <c10/core/CPUAllocator.h>
#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "state_dict/errors.h"
#include "state_dict/formats.h"
#include "state_dict/pickle_reader.h"
#include "state_dict/tensor_names.h"

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

/// persistent_load: the record data/<key> as a storage of `numel` elements,
/// checked against the bytes the record holds (which cannot exceed the file's:
/// torch.save stores records uncompressed).
c10::Storage load_storage(PyTorchStreamReader& reader,
                          uint64_t file_size,
                          const std::string& key,
                          c10::ScalarType dtype,
                          int64_t numel) {
  const std::string record = "data/" + key;
  if (!reader.hasRecord(record)) {
    pickle_corrupt(fmt::format("storage '{}': the archive has no record '{}'", key, record));
  }
  const size_t record_bytes = reader.getRecordSize(record);
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), c10::elementSize(dtype), &nbytes) ||
      nbytes > record_bytes || record_bytes > file_size) {
    pickle_corrupt(
        fmt::format("storage '{}' claims {} elements of {} but its record '{}' holds "
                    "{} bytes (file: {} bytes)",
                    key, numel, c10::toString(dtype), record, record_bytes, file_size));
  }
  auto [data, size] = reader.getRecord(record);
  return c10::Storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(nbytes), std::move(data),
                      /*allocator=*/nullptr, /*resizable=*/false);
}

}  // namespace

ReadResult read_torch_save(const std::string& path) {
  auto reader = with_file_context(path, "not a readable zip archive",
                                  [&] { return std::make_unique<PyTorchStreamReader>(path); });
  check_byte_order(path, *reader);
  const uint64_t file_size = std::filesystem::file_size(path);
  const auto pickle_record = with_file_context(path, "corrupt record 'data.pkl'",
                                               [&] { return reader->getRecord("data.pkl"); });
  const std::string_view pickle(static_cast<const char*>(std::get<0>(pickle_record).get()),
                                std::get<1>(pickle_record));
  ValueArena arena(/*copy_budget=*/pickle.size());
  const StorageLoader loader = [&](const std::string& key, c10::ScalarType dtype, int64_t numel) {
    return load_storage(*reader, file_size, key, dtype, numel);
  };
  ReadResult out;
  with_file_context(path, "data.pkl", [&] {
    const Value* root = read_weights_pickle(pickle, loader, arena);
    name_tensors(*root, pickle.size(), out);
  });
  return out;
}

}  // namespace detail
}  // namespace mha
