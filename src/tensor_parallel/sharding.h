#pragma once

// Private: which rows and columns of the whole MultiheadAttention's
// parameters a rank holds, and the way back from the ranks' shards.

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace mha {
namespace detail {

/// Rank `rank` of `world_size` holds features [start, start + width) of the
/// embed_dim E: its heads' slice of q, k, v and of out_proj's input columns.
struct Shard {
  Shard(int64_t embed_dim, int rank, int world_size)
      : width(embed_dim / world_size), start(width * rank), world_size(world_size) {}
  int64_t width;
  int64_t start;
  int world_size;

  /// Features [start, start + width) along `dim` of a whole tensor.
  torch::Tensor of(const torch::Tensor& whole, int64_t dim) const {
    return whole.narrow(dim, start, width);
  }

  /// This rank's rows of each third of a packed [q; k; v] tensor (3E, ...),
  /// packed again: (3 * width, ...).
  torch::Tensor of_packed(const torch::Tensor& packed) const {
    const auto thirds = packed.chunk(3);
    return at::cat({of(thirds[0], 0), of(thirds[1], 0), of(thirds[2], 0)});
  }

  /// The whole packed tensor (3E, ...) from the ranks' packed shards
  /// concatenated in rank order (p * 3 * width, ...).
  torch::Tensor whole_packed(const torch::Tensor& gathered) const {
    std::vector<int64_t> grouped{world_size, 3, width};
    std::vector<int64_t> whole{3 * width * world_size};
    for (int64_t d = 1; d < gathered.dim(); ++d) {
      grouped.push_back(gathered.size(d));
      whole.push_back(gathered.size(d));
    }
    // (p, 3, w, ...) -> (3, p, w, ...) -> (3E, ...)
    return gathered.view(grouped).transpose(0, 1).reshape(whole);
  }
};

}  // namespace detail
}  // namespace mha
