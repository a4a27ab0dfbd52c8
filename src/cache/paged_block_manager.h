#pragma once

// Private: the block manager behind mha::PagedKVCache (vLLM's block manager):
// the free list, the blocks' reference counts, each sequence's block table and
// length, the id counter, and a stack step's tables. It holds no keys or
// values: every layer's pool (PagedKVCacheState) that shares it stores its
// keys and values at the same block indices, so one table serves all of a
// stack's layers.

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace mha {
namespace detail {

/// A block copied on write: each pool copies block `from` into block `to`.
struct BlockCopy {
  int64_t from = 0;
  int64_t to = 0;
};

/// A checked call's row offsets on the host: the queries', and the new keys'
/// (a self-attention cache: the queries' own; a static one: the memories given).
struct PagedOffsets {
  std::vector<int64_t> queries, keys;
};

/// The new key positions of each sequence: (num_seqs,) from `offsets.keys`.
std::vector<int64_t> new_key_positions(const PagedOffsets& offsets);

/// A call's layout of its sequences for the decode kernel and the writes,
/// made once per step and shared by every layer's call.
struct PagedStepTables {
  torch::Tensor block_table;  ///< (N, max_blocks) int32, each sequence's blocks in order
  torch::Tensor lengths;      ///< (N,) int32, each sequence's length after the growth
  torch::Tensor new_rows;     ///< (new positions,) int64, the pool rows they go to, in call order
};

/// A stack step in progress on one manager: the table has grown once for it;
/// each layer's call writes its own pool at the grown rows.
struct PagedStepRecord {
  /// The step's sequences, in call order.
  std::vector<int64_t> ids;
  /// Its offsets, checked and copied to the host once.
  PagedOffsets offsets;
  /// Each sequence's length before the step.
  std::vector<int64_t> lengths_before;
  /// The copies on write of the step's growth, for every pool to make once.
  std::vector<BlockCopy> copies;
  /// The block tables, lengths and new rows of `ids` after the growth.
  PagedStepTables tables;
};

class PagedBlockManager {
 public:
  /// One sequence: its blocks in position order, and the pool row of each of
  /// its positions (appended as it grows; its length is their count).
  struct Sequence {
    std::vector<int64_t> blocks;
    std::vector<int64_t> rows;
    int64_t length() const { return static_cast<int64_t>(rows.size()); }
  };

  /// `num_blocks` free blocks of `block_size` positions (checked by the caller).
  PagedBlockManager(int64_t num_blocks, int64_t block_size);

  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return static_cast<int64_t>(refcount_.size()); }
  int64_t num_free_blocks() const { return static_cast<int64_t>(free_.size()); }

  /// The sequence `id`; throws naming `id` and the known ones when there is none.
  const Sequence& sequence(int64_t id) const;
  bool contains(int64_t id) const { return sequences_.count(id) != 0; }
  /// The ids, ascending.
  std::vector<int64_t> ids() const;
  /// The pool rows of `id`'s positions, (length,) int64, the newest last;
  /// made once per change of the table, then shared by every layer's call.
  const torch::Tensor& rows(int64_t id) const;

  /// The layout of `ids` (known) whose newest `new_positions` were just grown.
  PagedStepTables step_tables(const std::vector<int64_t>& ids,
                              const std::vector<int64_t>& new_positions) const;

  /// A new, empty sequence; its id.
  int64_t add_sequence();
  /// A new sequence sharing `id`'s blocks; its id.
  int64_t fork(int64_t id);
  /// Forgets `id`; frees the blocks no other sequence holds.
  void release(int64_t id);

  /// Throws unless the ids are known and distinct and the free blocks suffice
  /// for `grow`: new blocks, and a copy of a shared, partly filled last block
  /// for each writer but its last holder (that one writes in place once the
  /// others have copied it). `fix`: what the caller can do about too few blocks.
  void check_room(
      const std::vector<int64_t>& ids,
      const std::vector<int64_t>& new_positions,
      const char* fix = "release() finished sequences or give the cache more blocks") const;
  /// After `check_room`: each id in order copies a shared tail block it
  /// writes into, takes new blocks, advances its length. Returns the copies
  /// for the pools to make.
  std::vector<BlockCopy> grow(const std::vector<int64_t>& ids,
                              const std::vector<int64_t>& new_positions);

  /// The stack step in progress, or null.
  const PagedStepRecord* step() const { return step_ ? &*step_ : nullptr; }
  /// After `check_room`: grows the table for the step and opens it.
  void open_step(const std::vector<int64_t>& ids, const PagedOffsets& offsets);
  /// Ends the step (its growth stays).
  void close_step() { step_.reset(); }

 private:
  /// A block from the free list, held once.
  int64_t take_block();
  /// One holder fewer; back to the free list when none is left.
  void drop_block(int64_t block);
  /// `s` copies its shared tail block; returns the copy.
  BlockCopy copy_tail(Sequence& s);

  int64_t block_size_;
  std::vector<int64_t> refcount_;  // per block: the sequences holding it
  std::vector<int64_t> free_;      // blocks no sequence holds (taken from the back)
  std::map<int64_t, Sequence> sequences_;
  mutable std::map<int64_t, torch::Tensor> rows_made_;  // `rows` per id, until it changes
  int64_t next_id_ = 0;
  std::optional<PagedStepRecord> step_;
};

}  // namespace detail
}  // namespace mha
