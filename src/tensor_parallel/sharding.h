#pragma once

// Private: which rows and columns of the whole MultiheadAttention's
// parameters a rank holds, and the way back from the ranks' shards.

#include <ATen/ATen.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mha {
namespace detail {

/// A box of a whole tensor: [begin[d], begin[d] + sizes[d]) along each dim d.
struct Box {
  std::vector<int64_t> begin;
  std::vector<int64_t> sizes;
};

/// The box `box` of `whole`, a view.
inline torch::Tensor narrow_box(const torch::Tensor& whole, const Box& box) {
  torch::Tensor out = whole;
  for (int64_t d = 0; d < whole.dim(); ++d) out = out.narrow(d, box.begin[d], box.sizes[d]);
  return out;
}

/// The dimension along which the parameter `name` (Python's name) is split:
/// 0 for the q, k, v rows (packed or not) and their bias, 1 for
/// `out_proj.weight`'s input columns, 2 for `bias_k`/`bias_v`; nullopt for
/// `out_proj.bias`, which every rank holds whole.
inline std::optional<int64_t> split_dim(const std::string& name) {
  if (name == "out_proj.bias") return std::nullopt;
  if (name == "out_proj.weight") return 1;
  if (name == "bias_k" || name == "bias_v") return 2;
  return 0;
}

/// Whether `name` holds [q; k; v] thirds along dim 0, each split on its own.
inline bool is_packed(const std::string& name) {
  return name == "in_proj_weight" || name == "in_proj_bias";
}

/// Rank `rank` of `world_size` holds features [start, start + width) of the
/// embed_dim E: its heads' slice of q, k, v and of out_proj's input columns.
struct Shard {
  Shard(int64_t embed_dim, int rank, int world_size)
      : width(embed_dim / world_size), start(width * rank), rank(rank), world_size(world_size) {}
  int64_t width;
  int64_t start;
  int rank;
  int world_size;

  /// The boxes of the whole parameter `name` (sizes `whole`) that this rank
  /// holds, in the order its shard stacks them along dim 0: a packed
  /// tensor's three thirds, one box otherwise.
  std::vector<Box> boxes(const std::string& name, c10::IntArrayRef whole) const {
    const auto dim = split_dim(name);
    const auto box = [&](int64_t begin) {
      Box b{std::vector<int64_t>(whole.size(), 0), whole.vec()};
      if (dim) {
        b.begin[*dim] = begin;
        b.sizes[*dim] = width;
      }
      return b;
    };
    if (!is_packed(name)) return {box(start)};
    const int64_t third = whole[0] / 3;
    return {box(start), box(third + start), box(2 * third + start)};
  }

  /// This rank's shard of the whole parameter `name`: its boxes stacked
  /// along dim 0 (a new tensor for a packed one, else a view).
  torch::Tensor of(const std::string& name, const torch::Tensor& whole) const {
    std::vector<torch::Tensor> parts;
    for (const Box& box : boxes(name, whole.sizes())) parts.push_back(narrow_box(whole, box));
    return parts.size() == 1 ? parts[0] : at::cat(parts);
  }

  /// The whole sizes of the parameter `name` whose shard has sizes `local`.
  std::vector<int64_t> whole_sizes(const std::string& name, c10::IntArrayRef local) const {
    std::vector<int64_t> whole = local.vec();
    if (const auto dim = split_dim(name)) whole[*dim] *= world_size;
    return whole;
  }

  /// The whole parameter `name` (split, not `out_proj.bias`) from every
  /// rank's shard, in rank order: one new tensor.
  torch::Tensor whole_from(const std::string& name, const std::vector<torch::Tensor>& ranks) const {
    if (!is_packed(name)) return at::cat(ranks, *split_dim(name));
    std::vector<torch::Tensor> rows;  // q of every rank, then k, then v: (3E, ...)
    for (int64_t third = 0; third < 3; ++third) {
      for (const auto& shard : ranks) rows.push_back(shard.narrow(0, third * width, width));
    }
    return at::cat(rows);
  }
};

}  // namespace detail
}  // namespace mha
