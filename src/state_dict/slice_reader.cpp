// Boxes of a weights file's tensors (slice_reader.h): the format dispatch, the
// walk over a box's contiguous runs of bytes, and the reader of tensors
// already in memory (TorchScript archives).

#include "state_dict/slice_reader.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

#include "state_dict/errors.h"
#include "state_dict/formats.h"

namespace mha {
namespace detail {
namespace {

using torch::Tensor;

/// The box of `whole` that starts at `begin` with sizes `sizes`, a view.
Tensor narrow_to(const Tensor& whole, c10::IntArrayRef begin, c10::IntArrayRef sizes) {
  Tensor out = whole;
  for (int64_t d = 0; d < whole.dim(); ++d) out = out.narrow(d, begin[d], sizes[d]);
  return out;
}

class InMemorySliceReader final : public SliceReader {
 public:
  InMemorySliceReader(TensorMap tensors, std::vector<std::string> skipped) {
    tensors_ = std::move(tensors);
    skipped_ = std::move(skipped);
  }

  void read(const Tensor& tensor, c10::IntArrayRef begin, Tensor& out) override {
    out.copy_(narrow_to(tensor, begin, out.sizes()));
  }
};

/// How many innermost dimensions of `view`'s box `box` form one contiguous
/// run of bytes, from dimension `inner` on, and the run's elements.
std::pair<int64_t, int64_t> contiguous_run(const Tensor& view, c10::IntArrayRef box) {
  int64_t inner = view.dim(), run = 1, expected_stride = 1;
  while (inner > 0) {
    const int64_t d = inner - 1;
    if (view.size(d) == 1) {  // its stride does not matter
      --inner;
      continue;
    }
    if (view.stride(d) != expected_stride) break;
    run *= box[d];
    --inner;
    if (box[d] != view.size(d)) break;  // a part of dimension d: the run ends there
    expected_stride = view.stride(d) * view.size(d);
  }
  return {inner, run};
}

}  // namespace

void read_box(const Tensor& view,
              c10::IntArrayRef begin,
              Tensor& out,
              const ByteReader& read_bytes) {
  const auto box = out.sizes();
  TORCH_CHECK(out.is_contiguous() && out.scalar_type() == view.scalar_type() &&
                  begin.size() == box.size() && box.size() == view.sizes().size(),
              "read_box: expected a contiguous output of the view's dtype and rank");
  for (size_t d = 0; d < box.size(); ++d) {
    TORCH_CHECK(begin[d] >= 0 && begin[d] + box[d] <= view.size(d),
                fmt::format("read_box: the box at {} of sizes {} leaves the tensor's sizes {}",
                            begin.vec(), box.vec(), view.sizes().vec()));
  }
  if (out.numel() == 0) return;
  const auto [inner, run] = contiguous_run(view, box);
  const int64_t item = view.element_size();
  std::vector<int64_t> index(inner, 0);  // the run's position in dimensions [0, inner)
  auto* destination = static_cast<char*>(out.data_ptr());
  for (int64_t r = 0, runs = out.numel() / run; r < runs; ++r) {
    int64_t element = view.storage_offset();
    for (int64_t d = 0; d < view.dim(); ++d) {
      element += (begin[d] + (d < inner ? index[d] : 0)) * view.stride(d);
    }
    read_bytes(static_cast<uint64_t>(element * item), destination, static_cast<size_t>(run * item));
    destination += run * item;
    for (int64_t d = inner - 1; d >= 0 && ++index[d] == box[d]; --d) index[d] = 0;
  }
}

std::unique_ptr<SliceReader> in_memory_slice_reader(TensorMap tensors,
                                                    std::vector<std::string> skipped) {
  return std::make_unique<InMemorySliceReader>(std::move(tensors), std::move(skipped));
}

std::unique_ptr<SliceReader> open_slice_reader(const std::string& path) {
  switch (detect_format(path)) {
    case FileFormat::kTorchSave:
      return torch_save_slice_reader(path);
    case FileFormat::kTorchScript:
      return in_memory_slice_reader(read_torchscript(path), {});
    case FileFormat::kSafetensors:
      return safetensors_slice_reader(path);
  }
  fail_file(path, "unknown format");
}

}  // namespace detail
}  // namespace mha
