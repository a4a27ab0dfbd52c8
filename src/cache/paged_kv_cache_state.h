#pragma once

// Private: the state behind mha::PagedKVCache: one layer's key and value pool
// over a block manager (the block tables), its own or shared with the other
// layers of a stack (PagedStackCache).

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "cache/paged_block_manager.h"
#include "mha/paged_kv_cache.h"

namespace mha {
namespace detail {

struct PagedKVCacheState {
  const MultiheadAttentionImpl* owner = nullptr;
  bool is_static = false;
  torch::Tensor keys, values;  // (num_blocks * block_size, H, head_dim)
  /// The block tables: this pool's alone, or shared by a stack's pools.
  std::shared_ptr<PagedBlockManager> blocks;

  /// Whether other pools share the block tables (a `PagedStackCache`'s).
  bool shares_blocks() const { return blocks.use_count() > 1; }
  /// Makes a step's copies on write in this pool: (block_size, H, hd) each.
  void copy_blocks(const std::vector<BlockCopy>& copies);
  /// Writes `k`, `v` (new positions, H, hd; undefined: none) at the pool rows
  /// `new_rows` (new positions,): one copy per pool for the whole call.
  void write(const torch::Tensor& new_rows, const torch::Tensor& k, const torch::Tensor& v);
  /// All of `id`'s keys and values, (1, H, length, hd), gathered from the pools.
  std::pair<torch::Tensor, torch::Tensor> read(int64_t id) const;
};

}  // namespace detail
}  // namespace mha
