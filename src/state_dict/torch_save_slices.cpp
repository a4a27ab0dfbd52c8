// Boxes of a torch.save archive's tensors: data.pkl is read with storages on
// the meta device (sizes only, no bytes), then each box is read from the
// record's bytes in the file, which torch.save stores uncompressed (caffe2's
// PyTorchStreamWriter; PyTorchStreamReader::getRecordOffset gives where they
// start). A record stored compressed (another zip writer) or a tensor that is
// not contiguous in its storage is read whole, one at a time, then freed.

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <utility>

#include "state_dict/errors.h"
#include "state_dict/file_io.h"
#include "state_dict/slice_reader.h"
#include "state_dict/torch_save_archive.h"

namespace mha {
namespace detail {
namespace {

using caffe2::serialize::PyTorchStreamReader;
using torch::Tensor;

/// Where a storage's bytes are: its record, and the record's bytes in the
/// file when it is stored (else `stored` is false).
struct StorageBytes {
  std::string record;
  bool stored;
  uint64_t file_offset;
};

uint32_t little_endian(const uint8_t* bytes, int n) {
  uint32_t value = 0;
  for (int i = n - 1; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

class TorchSaveSliceReader final : public SliceReader {
 public:
  explicit TorchSaveSliceReader(const std::string& path)
      : path_(path), reader_(open_torch_save(path)), file_(path) {
    std::unordered_map<const c10::StorageImpl*, StorageRecord> records;
    const StorageLoader loader = [&](const std::string& key, c10::ScalarType dtype,
                                     int64_t numel) {  // the sizes only
      const StorageRecord record = storage_record(*reader_, file_.size(), key, dtype, numel);
      auto storage = torch::empty({static_cast<int64_t>(record.nbytes)},
                                  torch::TensorOptions().dtype(torch::kUInt8).device(torch::kMeta))
                         .storage();
      records.emplace(storage.unsafeGetStorageImpl(), record);
      return storage;
    };
    ReadResult read = read_archive_tensors(path, *reader_, loader);
    tensors_ = std::move(read.tensors);
    skipped_ = std::move(read.skipped);
    for (const auto& [storage, record] : records) storages_.emplace(storage, locate(record));
  }

  void read(const Tensor& tensor, c10::IntArrayRef begin, Tensor& out) override {
    const StorageBytes& bytes = storages_.at(tensor.storage().unsafeGetStorageImpl());
    if (bytes.stored && tensor.is_contiguous()) {
      read_box(tensor, begin, out, [&](uint64_t offset, void* destination, size_t n) {
        file_.read_at(bytes.file_offset + offset, destination, n);
      });
      return;
    }
    auto [data, size] = with_file_context(path_, "cannot read record '" + bytes.record + "'",
                                          [&] { return reader_->getRecord(bytes.record); });
    const c10::Storage storage(c10::Storage::use_byte_size_t(), size, std::move(data),
                               /*allocator=*/nullptr, /*resizable=*/false);
    const Tensor whole =
        torch::empty({0}, torch::TensorOptions().dtype(tensor.scalar_type()))
            .set_(storage, tensor.storage_offset(), tensor.sizes(), tensor.strides());
    read_box(whole, begin, out, [&](uint64_t offset, void* destination, size_t n) {
      std::memcpy(destination, static_cast<const char*>(whole.storage().data()) + offset, n);
    });
  }

 private:
  /// Whether `record` is stored (zip method 0, not encrypted), from its
  /// local file header, and where its bytes start in the file.
  StorageBytes locate(const StorageRecord& record) {
    std::array<uint8_t, 30> header{};  // the zip local file header's fixed part
    const uint64_t header_offset = with_file_context(
        path_, "corrupt record '" + record.name + "'",
        [&] { return static_cast<uint64_t>(reader_->getRecordHeaderOffset(record.name)); });
    file_.read_at(header_offset, header.data(), header.size());
    const bool stored = little_endian(header.data(), 4) == 0x04034b50 &&
                        (little_endian(header.data() + 6, 2) & 1) == 0 &&
                        little_endian(header.data() + 8, 2) == 0;
    if (!stored) return {record.name, false, 0};
    const uint64_t offset = with_file_context(path_, "corrupt record '" + record.name + "'", [&] {
      return static_cast<uint64_t>(reader_->getRecordOffset(record.name));
    });
    if (offset > file_.size() || record.nbytes > file_.size() - offset) {
      fail_file(path_, fmt::format("record '{}' of {} bytes at offset {} reaches past the end of "
                                   "the file ({} bytes)",
                                   record.name, record.nbytes, offset, file_.size()));
    }
    return {record.name, true, offset};
  }

  std::string path_;
  std::unique_ptr<PyTorchStreamReader> reader_;
  InputFile file_;
  std::unordered_map<const c10::StorageImpl*, StorageBytes> storages_;
};

}  // namespace

std::unique_ptr<SliceReader> torch_save_slice_reader(const std::string& path) {
  return std::make_unique<TorchSaveSliceReader>(path);
}

}  // namespace detail
}  // namespace mha
