#pragma once

// Private: the state behind mha::PagedKVCache: the key and value pools, the
// blocks' reference counts and free list, each sequence's block table.

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "mha/paged_kv_cache.h"

namespace mha {
namespace detail {

struct PagedKVCacheState {
  /// One sequence: its blocks in position order, and its cached positions.
  struct Sequence {
    std::vector<int64_t> blocks;
    int64_t length = 0;
  };

  const MultiheadAttentionImpl* owner = nullptr;
  int64_t block_size = 0;
  bool is_static = false;
  torch::Tensor keys, values;     // (num_blocks * block_size, H, head_dim)
  std::vector<int64_t> refcount;  // per block: the sequences holding it
  std::vector<int64_t> free;      // blocks no sequence holds (taken from the back)
  std::map<int64_t, Sequence> sequences;
  int64_t next_id = 0;

  int64_t num_blocks() const { return static_cast<int64_t>(refcount.size()); }
  /// The sequence `id`; throws naming `id` and the known ones when there is none.
  const Sequence& sequence(int64_t id) const;
  /// Throws unless the ids are known and distinct and the free blocks suffice
  /// for `grow` of each id in order: new blocks, and a copy of a shared,
  /// partly filled last block for each writer but its last holder (that one
  /// writes in place once the others have copied it).
  /// `fix`: what the caller can do about too few blocks (its own methods' names).
  void check_room(
      const std::vector<int64_t>& ids,
      const std::vector<int64_t>& new_positions,
      const char* fix = "release() finished sequences or give the cache more blocks") const;
  /// Makes room for `new_positions` more positions of `id` (after
  /// `check_room`): copies a shared last block, takes new ones, advances the
  /// length. Returns the pool rows of all its positions, (length,) int64, the
  /// new ones last.
  torch::Tensor grow(int64_t id, int64_t new_positions);
  /// The cache as a call's key/value source: after `check_room`, writes `k`,
  /// `v` (new positions, H, hd; undefined: none) as `id`'s newest positions,
  /// then returns all its keys and values, (1, H, length, hd) gathered from the pools.
  std::pair<torch::Tensor, torch::Tensor> append_and_read(int64_t id,
                                                          const torch::Tensor& k,
                                                          const torch::Tensor& v);
  /// A block from the free list, held once.
  int64_t take_block();
  /// One holder fewer; back to the free list when none is left.
  void drop_block(int64_t block);
};

}  // namespace detail
}  // namespace mha
