// Boxes of a `.safetensors` file's tensors: the header is read and checked as
// for whole tensors (safetensors_index.h), the tensors are meta tensors of
// its dtypes and shapes, and a box reads only its own bytes (a row-major
// tensor's rows are one range, its columns one range per row).

#include <unordered_map>
#include <utility>

#include "state_dict/file_io.h"
#include "state_dict/safetensors_index.h"
#include "state_dict/slice_reader.h"

namespace mha {
namespace detail {
namespace {

using torch::Tensor;

class SafetensorsSliceReader final : public SliceReader {
 public:
  explicit SafetensorsSliceReader(const std::string& path)
      : file_(path), index_(read_safetensors_index(file_)) {
    for (const auto& entry : index_.entries) {
      Tensor meta =
          torch::empty(entry.shape, torch::TensorOptions().dtype(entry.dtype).device(torch::kMeta));
      entry_of_.emplace(meta.unsafeGetTensorImpl(), &entry);
      tensors_.emplace(entry.name, std::move(meta));
    }
  }

  void read(const Tensor& tensor, c10::IntArrayRef begin, Tensor& out) override {
    const SafetensorsEntry& entry = *entry_of_.at(tensor.unsafeGetTensorImpl());
    read_box(tensor, begin, out, [&](uint64_t offset, void* destination, size_t n) {
      file_.read_at(index_.data_start + entry.begin + offset, destination, n);
    });
    if (entry.dtype == c10::kBool) {
      check_bool_bytes(file_.path(), entry.name, out.data_ptr(), out.nbytes());
    }
  }

 private:
  InputFile file_;
  const SafetensorsIndex index_;
  std::unordered_map<const c10::TensorImpl*, const SafetensorsEntry*> entry_of_;
};

}  // namespace

std::unique_ptr<SliceReader> safetensors_slice_reader(const std::string& path) {
  return std::make_unique<SafetensorsSliceReader>(path);
}

}  // namespace detail
}  // namespace mha
