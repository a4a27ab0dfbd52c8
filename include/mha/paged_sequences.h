#pragma once

// The sequences of a paged cache's block table, written once for the caches
// that hold one (`PagedKVCache`: one attention's pool; `PagedStackCache`: a
// stack's pools over one table). See docs/decoding.md.

#include <cstdint>
#include <vector>

namespace mha {

namespace detail {
class PagedBlockManager;
}  // namespace detail

/// The sequence bookkeeping of a paged cache: each sequence a table of
/// blocks, allocated as it grows, shared after `fork` and copied when a
/// sequence writes into a shared one (copy on write). On a stack's cache it
/// acts once for every layer. Errors (`c10::Error`, nothing changed): an
/// unknown id.
class PagedSequences {
 public:
  /// A new, empty sequence; its id.
  int64_t add_sequence();
  /// A new sequence holding `id`'s positions, sharing its blocks (beam search,
  /// several samples of one prompt); its id.
  int64_t fork(int64_t id);
  /// Forgets sequence `id` and frees the blocks no other sequence shares.
  void release(int64_t id);
  /// Whether `id` is a sequence of this cache.
  bool contains(int64_t id) const;
  /// The ids of the sequences, ascending.
  std::vector<int64_t> sequence_ids() const;
  /// Cached positions of sequence `id` (in every layer alike).
  int64_t length(int64_t id) const;

  /// Blocks no sequence holds.
  int64_t num_free_blocks() const;
  /// Blocks in the table (each pool has this many).
  int64_t num_blocks() const;
  /// Positions per block.
  int64_t block_size() const;

 protected:
  /// The sequences of `table`, which the deriving cache's pools own (a
  /// pointer that stays valid when the cache moves).
  explicit PagedSequences(detail::PagedBlockManager* table) : table_(table) {}

 private:
  detail::PagedBlockManager* table_;
};

}  // namespace mha
