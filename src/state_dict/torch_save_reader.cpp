// Reads `torch.save` zip archives (PyTorch 1.6+): LibTorch's zip reader
// (PyTorchStreamReader) and unpickler (torch::jit::Unpickler), after the pickle
// went through rewrite_ordered_dicts (see pickle_rewrite.cpp for why).

#include "state_dict/errors.h"
#include "state_dict/formats.h"
#include "state_dict/pickle_rewrite.h"

#include <ATen/core/ivalue.h>
#include <c10/core/CPUAllocator.h>
#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/serialization/storage_context.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>

namespace mha {
namespace detail {
namespace {

using caffe2::serialize::PyTorchStreamReader;

/// Storage records read so far: the buffer the unpickler got for each, so the
/// tensors can be checked against the bytes that really exist.
struct RecordTable {
  std::unordered_map<const void*, size_t> bytes_by_data;
};

/// Checks that `tensor` (as rebuilt by the unpickler, before anything reads
/// its data) lies inside the bytes of its storage record. The unpickler trusts
/// the pickled numel, sizes, strides and offset; a corrupt file could
/// otherwise make a tensor reach past its buffer.
void check_tensor_bounds(const std::string& path,
                         const std::string& key,
                         const torch::Tensor& tensor,
                         const RecordTable& records) {
  TORCH_CHECK(tensor.layout() == torch::kStrided && !tensor.is_quantized(),
              fmt::format("{}: tensor '{}' has layout {}; only dense tensors are supported", path,
                          key, fmt::streamed(tensor.layout())));
  const auto& storage = tensor.storage();
  const void* data = storage.data();
  const auto found = records.bytes_by_data.find(data);
  const size_t record_bytes = found == records.bytes_by_data.end() ? 0 : found->second;
  if (storage.nbytes() > record_bytes) {
    fail_file(path, fmt::format("tensor '{}': its storage claims {} bytes but the archive "
                                "record holds {}",
                                key, storage.nbytes(), record_bytes));
  }
  const auto sizes = tensor.sizes();
  const auto strides = tensor.strides();
  int64_t last = tensor.storage_offset();  // highest element index reached
  bool empty = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || strides[d] < 0) {
      fail_file(path, fmt::format("tensor '{}': negative size or stride (sizes {}, strides {})",
                                  key, fmt::streamed(sizes), fmt::streamed(strides)));
    }
    empty = empty || sizes[d] == 0;
    int64_t reach = 0;
    if (sizes[d] > 0 && (__builtin_mul_overflow(sizes[d] - 1, strides[d], &reach) ||
                         __builtin_add_overflow(last, reach, &last))) {
      fail_file(path, fmt::format("tensor '{}': sizes {} and strides {} overflow", key,
                                  fmt::streamed(sizes), fmt::streamed(strides)));
    }
  }
  if (tensor.storage_offset() < 0) {
    fail_file(path, fmt::format("tensor '{}': negative storage offset {}", key,
                                tensor.storage_offset()));
  }
  if (empty) {
    return;
  }
  const auto item = static_cast<int64_t>(tensor.element_size());
  int64_t end_byte = 0;
  if (__builtin_mul_overflow(last + 1, item, &end_byte) ||
      static_cast<uint64_t>(end_byte) > storage.nbytes()) {
    fail_file(path, fmt::format("tensor '{}' (offset {}, sizes {}, strides {}) reaches past its "
                                "storage: storage only has {} bytes",
                                key, tensor.storage_offset(), fmt::streamed(sizes),
                                fmt::streamed(strides), storage.nbytes()));
  }
}

/// Adds the tensors of `dict` to `out` by dotted name: nested dicts are
/// flattened, `_metadata`, non-string keys (the OrderedDict state, see
/// pickle_rewrite.h) and other non-tensor values are skipped.
void flatten(const std::string& path,
             const c10::impl::GenericDict& dict,
             const std::string& prefix,
             const RecordTable& records,
             TensorMap& out) {
  for (const auto& item : dict) {
    if (!item.key().isString()) {
      continue;
    }
    const std::string key = prefix + item.key().toStringRef();
    if (item.key().toStringRef() == "_metadata") {
      continue;
    }
    const auto& value = item.value();
    if (value.isGenericDict()) {
      flatten(path, value.toGenericDict(), key + ".", records, out);
    } else if (value.isTensor()) {
      const auto tensor = value.toTensor().detach();
      check_tensor_bounds(path, key, tensor, records);
      if (!out.emplace(key, tensor).second) {
        fail_file(path, fmt::format("key '{}' appears twice once nested dicts are flattened", key));
      }
    }
  }
}

}  // namespace

TensorMap read_torch_save(const std::string& path) {
  auto reader = with_file_context(path, "not a readable zip archive", [&] {
    return std::make_unique<PyTorchStreamReader>(path);
  });
  if (reader->hasRecord("byteorder")) {
    const auto [data, size] =
        with_file_context(path, "corrupt record 'byteorder'", [&] { return reader->getRecord("byteorder"); });
    const std::string order(static_cast<const char*>(data.get()), size);
    if (order != "little") {
      fail_file(path, fmt::format("byte order '{}' is not supported (only little-endian)", order));
    }
  }
  // A plain pair, not a structured binding: C++17 lambdas cannot capture those.
  const auto pickle_record = with_file_context(
      path, "corrupt record 'data.pkl'", [&] { return reader->getRecord("data.pkl"); });
  const std::string pickle = with_file_context(path, "data.pkl", [&] {
    return rewrite_ordered_dicts(std::string_view(
        static_cast<const char*>(std::get<0>(pickle_record).get()), std::get<1>(pickle_record)));
  });

  RecordTable records;
  auto read_record = [&](const std::string& name) -> at::DataPtr {
    const std::string record = "data/" + name;
    auto [data, size] = reader->getRecord(record);
    records.bytes_by_data[data.get()] = size;
    return std::move(data);
  };
  size_t consumed = 0;
  auto read_pickle = [&](char* buffer, size_t n) -> size_t {
    n = std::min(n, pickle.size() - consumed);
    std::memcpy(buffer, pickle.data() + consumed, n);
    consumed += n;
    return n;
  };
  // Storages by key: views of one storage (tied weights) stay views of one
  // storage, as in Python.
  auto storages = std::make_shared<torch::jit::DeserializationStorageContext>();
  const c10::IValue root = with_file_context(path, "cannot unpickle data.pkl", [&] {
    torch::jit::Unpickler unpickler(read_pickle, /*type_resolver=*/nullptr,
                                    /*obj_loader=*/nullptr, read_record,
                                    /*device=*/c10::Device(c10::kCPU),  // CUDA tensors load to CPU
                                    /*use_storage_device=*/false,
                                    torch::jit::Unpickler::defaultTypeParser, storages);
    unpickler.set_version(reader->version());
    return unpickler.parse_ivalue();
  });
  if (!root.isGenericDict()) {
    fail_file(path, fmt::format("the archive holds a {}, not a dict of tensors (save "
                                "model.state_dict() or a dict of tensors)",
                                root.tagKind()));
  }
  TensorMap out;
  flatten(path, root.toGenericDict(), "", records, out);
  return out;
}

}  // namespace detail
}  // namespace mha
