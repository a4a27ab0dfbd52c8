// TensorParallelMultiheadAttention::load: this rank's rows and columns of a
// whole checkpoint, read a box at a time (state_dict/slice_reader.h), after
// load_state_dict's own checks of the keys and whole shapes.

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "mha/state_dict.h"
#include "mha/tensor_parallel.h"
#include "state_dict/slice_reader.h"
#include "tensor_parallel/plain_module.h"
#include "tensor_parallel/sharding.h"

namespace mha {

using torch::Tensor;

namespace {

/// This rank's shard of the file's whole tensor `in_file`, in the file's
/// dtype: its boxes read one after another into one tensor, stacked along dim 0.
Tensor read_shard(detail::SliceReader& file,
                  const Tensor& in_file,
                  const std::vector<detail::Box>& boxes) {
  std::vector<int64_t> sizes = boxes.front().sizes;
  sizes[0] = 0;
  for (const auto& box : boxes) sizes[0] += box.sizes[0];
  Tensor out = torch::empty(sizes, torch::TensorOptions().dtype(in_file.scalar_type()));
  int64_t row = 0;
  for (const auto& box : boxes) {
    Tensor rows = out.narrow(0, row, box.sizes[0]);  // (box.sizes), contiguous
    file.read(in_file, box.begin, rows);
    row += box.sizes[0];
  }
  return out;
}

}  // namespace

LoadResult TensorParallelMultiheadAttentionImpl::load(const std::string& path,
                                                      const LoadOptions& load_options) {
  const detail::Shard shard(options.embed_dim(), group->getRank(), group->getSize());
  const auto file = detail::open_slice_reader(path);
  const auto mine = mha::state_dict(*this);
  // The whole module's names and shapes as meta tensors: load_state_dict checks
  // the file against them (prefix, key map, strict, shapes, its messages).
  std::vector<std::pair<std::string, Tensor>> whole;
  for (const auto& [key, local] : mine) {
    whole.emplace_back(key, torch::empty(shard.whole_sizes(key, local.sizes()),
                                         local.options().device(torch::kMeta)));
  }
  LoadResult result = mha::load_state_dict(*detail::module_holding(whole, name()), file->tensors(),
                                           load_options, path);
  result.skipped_paths = file->skipped();
  // Every shard is read before any is copied: a failed read changes nothing.
  const auto provided = select_state_dict(file->tensors(), load_options, path);
  std::vector<std::pair<Tensor, Tensor>> staged;  // (parameter, its new values)
  for (const auto& [key, local] : mine) {
    const auto found = provided.find(key);
    if (found == provided.end()) continue;  // missing from a non-strict load: kept
    const Tensor& in_file = found->second;
    staged.emplace_back(
        local,
        read_shard(*file, in_file, shard.boxes(key, in_file.sizes())).to(local.scalar_type()));
  }
  torch::NoGradGuard no_grad;
  for (auto& [parameter, values] : staged) parameter.copy_(values);
  validated_ = false;
  return result;
}

}  // namespace mha
