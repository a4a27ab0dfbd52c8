#pragma once

// A paged key/value cache for serving many sequences at once: one attention
// module's projected keys and values in a pool of fixed-size blocks, each
// sequence a table of blocks (vLLM's paged attention, on the CPU). Filled by
// `MultiheadAttentionImpl::forward_paged`. See docs/decoding.md.

#include <mha/paged_sequences.h>
#include <torch/arg.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace mha {

class MultiheadAttentionImpl;
class PagedKVCache;
struct PagedKVCacheOptions;

namespace detail {
struct PagedKVCacheState;
class PagedBlockManager;
/// Private access for `MultiheadAttentionImpl::forward_paged`.
PagedKVCacheState& paged_kv_cache_state(PagedKVCache& cache);
/// One cache per module of `modules` (each its heads, head_dim, dtype,
/// device) over one block table of `options.num_blocks()` blocks shared by
/// all: what a `PagedStackCache` holds. Throws `c10::Error` for no modules or
/// a null one.
std::vector<PagedKVCache> caches_over_one_table(
    const std::vector<const MultiheadAttentionImpl*>& modules, const PagedKVCacheOptions& options);
}  // namespace detail

/// The pool's size: `num_blocks` blocks of `block_size` positions each.
struct PagedKVCacheOptions {
  PagedKVCacheOptions(int64_t num_blocks, int64_t block_size = 16)
      : num_blocks_(num_blocks), block_size_(block_size) {}

  /// The blocks `memory_bytes` holds for `module` (keys and values of
  /// `block_size` positions per block): the pool for a memory cap.
  static PagedKVCacheOptions for_bytes(const MultiheadAttentionImpl& module,
                                       int64_t memory_bytes,
                                       int64_t block_size = 16);

  /// Blocks in the pool.
  TORCH_ARG(int64_t, num_blocks);
  /// Positions per block.
  TORCH_ARG(int64_t, block_size);
  /// A cross-attention cache: each sequence's projected memory, written once
  /// (its first `forward_paged` call), attended without a causal mask.
  TORCH_ARG(bool, static_kv) = false;
};

/// The paged cache of one `mha::MultiheadAttention` (self-attention, or with
/// `static_kv` a cross-attention's memory per sequence): a pool of
/// key and value blocks, (num_blocks * block_size, num_heads, head_dim) each,
/// in the module's dtype and on its device, allocated at construction; each
/// sequence holds the blocks of its positions, allocated as it grows (a
/// sequence of length L holds ceil(L / block_size) blocks: the only unused
/// positions are the tail of its last block). Blocks are shared after `fork`
/// and copied when a sequence writes into a shared one (copy on write).
///
/// Errors (`c10::Error`, nothing changed): an unknown id, a call that needs
/// more blocks than are free. Not thread-safe: one thread uses a cache at a time.
///
/// A stack's caches share one block table (`PagedStackCache`, vLLM's block
/// manager over per-layer pools): one free list, one table per sequence and
/// one id counter for all of them, so `add_sequence`, `fork` and `release` on
/// any of them act on all. Such a table grows only in a stack step
/// (`TransformerEncoderImpl::forward_paged`, `TransformerDecoderImpl::forward_paged`,
/// `ContinuousBatch::step`): the step is checked once for the whole stack,
/// the table grows once, then each layer writes its own pool at the same
/// block indices. A layer's own `forward_paged` on a shared cache outside a
/// stack step may only read (0 new key rows for every sequence, as a
/// cross-attention's later steps); one that would add positions throws
/// `c10::Error` and changes nothing.
///
/// Example:
/// ```
/// mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(64, 4));
/// attn->eval();
/// mha::PagedKVCache cache(*attn, mha::PagedKVCacheOptions(/*num_blocks=*/64));
/// const int64_t a = cache.add_sequence(), b = cache.add_sequence();
/// auto x = torch::randn({5, 64});  // 3 new positions of a, then 2 of b
/// auto [y, w] = attn->forward_paged(x, x, x, cache, {a, b}, torch::tensor({0, 3, 5}));
/// ```
class PagedKVCache : public PagedSequences {
 public:
  /// A pool for `module`'s keys and values (its heads, head_dim, dtype, device).
  PagedKVCache(const MultiheadAttentionImpl& module, const PagedKVCacheOptions& options);
  PagedKVCache(PagedKVCache&&) noexcept;
  PagedKVCache& operator=(PagedKVCache&&) noexcept;
  PagedKVCache(const PagedKVCache&) = delete;
  PagedKVCache& operator=(const PagedKVCache&) = delete;
  ~PagedKVCache();

  /// Bytes of the key and value pools.
  int64_t memory_bytes() const;
  /// Bytes of the blocks the sequences hold (a shared block once).
  int64_t used_bytes() const;
  /// Whether it holds memories for cross-attention (`static_kv`).
  bool is_static() const;
  /// Whether `other` shares this cache's block table (a `PagedStackCache`'s
  /// layers do; a cache shares its own).
  bool shares_blocks_with(const PagedKVCache& other) const;

 private:
  /// A pool for `module` over the block table `blocks`.
  PagedKVCache(const MultiheadAttentionImpl& module,
               const PagedKVCacheOptions& options,
               std::shared_ptr<detail::PagedBlockManager> blocks);
  friend detail::PagedKVCacheState& detail::paged_kv_cache_state(PagedKVCache& cache);
  friend std::vector<PagedKVCache> detail::caches_over_one_table(
      const std::vector<const MultiheadAttentionImpl*>& modules,
      const PagedKVCacheOptions& options);
  std::unique_ptr<detail::PagedKVCacheState> state_;
};

}  // namespace mha
