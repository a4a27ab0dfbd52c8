#pragma once

// The paged caches of a whole stack as one object: every layer's key and
// value pool over one block table (vLLM's block manager: one table per
// sequence for every layer's pools). Made by the stacks
// (`TransformerEncoderImpl::make_paged_cache`, `TransformerDecoderImpl::make_paged_cache`
// and `make_paged_memory_cache`) and taken by their `forward_paged`. See
// docs/decoding.md.

#include <mha/paged_kv_cache.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mha {

class PagedStackCache;

namespace detail {
/// Private access for the stacks' paged steps: the per-layer caches.
std::vector<PagedKVCache>& stack_layers(PagedStackCache& cache);
}  // namespace detail

/// One `PagedKVCache` per layer of a stack over one block table: a sequence
/// is added, forked and released once for every layer, and a stack step
/// (`forward_paged`, `ContinuousBatch::step`) grows the table once and
/// writes each layer's pool at the same rows. Either every pool holds
/// self-attention keys and values, or (`static_kv`) every pool holds the
/// sequences' projected memories for cross-attention.
///
/// Errors (`c10::Error`, nothing changed): an unknown id; a step that needs
/// more blocks than are free. Not thread-safe; movable, not copyable.
///
/// Example:
/// ```
/// auto cache = decoder_only_stack->make_paged_cache(mha::PagedKVCacheOptions(/*num_blocks=*/64));
/// const int64_t a = cache.add_sequence();
/// auto y = decoder_only_stack->forward_paged(torch::randn({5, 64}), cache, {a},
///                                            torch::tensor({0, 5}));
/// const int64_t b = cache.fork(a);  // shares a's blocks in every layer
/// ```
class PagedStackCache : public PagedSequences {
 public:
  /// A pool per module of `modules` (a stack's attention modules, in layer
  /// order) over one table of `options.num_blocks()` blocks. Throws
  /// `c10::Error` for no modules or a null one.
  PagedStackCache(const std::vector<const MultiheadAttentionImpl*>& modules,
                  const PagedKVCacheOptions& options);
  PagedStackCache(PagedStackCache&&) noexcept = default;
  PagedStackCache& operator=(PagedStackCache&&) noexcept = default;
  PagedStackCache(const PagedStackCache&) = delete;
  PagedStackCache& operator=(const PagedStackCache&) = delete;

  /// Bytes of every layer's key and value pools.
  int64_t memory_bytes() const;
  /// Bytes of the blocks the sequences hold, in every layer's pools.
  int64_t used_bytes() const;
  /// Whether the pools hold memories for cross-attention (`static_kv`).
  bool is_static() const;

  /// Number of layers.
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  /// Layer `i`'s cache (`TransformerEncoderLayerImpl::forward_paged` and the
  /// like take it; it shares this table, so it grows only in a stack step).
  PagedKVCache& layer(int64_t i);
  /// See the non-const overload.
  const PagedKVCache& layer(int64_t i) const;

 private:
  /// The stack's cache over `layers` (which share one block table).
  explicit PagedStackCache(std::vector<PagedKVCache> layers);
  friend std::vector<PagedKVCache>& detail::stack_layers(PagedStackCache& cache);

  std::vector<PagedKVCache> layers_;
};

}  // namespace mha
