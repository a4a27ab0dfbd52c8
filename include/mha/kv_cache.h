#pragma once

// Incremental decoding for mha::MultiheadAttention: the projected keys and
// values of earlier calls, kept so that each new position costs work linear in
// the cached length. See docs/decoding.md.

#include <torch/types.h>

#include <cstdint>
#include <memory>

namespace mha {

class MultiheadAttentionImpl;
class KVCache;

namespace detail {
struct KVCacheState;
/// Private access for `MultiheadAttentionImpl::forward_cached`.
KVCacheState& kv_cache_state(KVCache& cache);
}  // namespace detail

/// The key/value cache of one `mha::MultiheadAttention` for one decoding
/// batch, filled by `MultiheadAttentionImpl::forward_cached`.
///
/// Two kinds, fixed at creation:
/// - `self_attention(max_len)`: causal self-attention; every call appends its
///   new positions' projected keys and values.
/// - `static_kv()`: cross-attention over a fixed memory; the first call
///   projects `key`/`value`, later calls pass undefined ones and reuse them.
///
/// Storage is allocated on the first call (when batch size, dtype and device
/// are known) as two (N, num_heads, capacity + extra, head_dim) buffers, the
/// layout `at::scaled_dot_product_attention` reads through views without
/// copies; `extra` holds the `bias_k`/`bias_v` row and the `add_zero_attn` row,
/// kept once, right after the cached keys. It holds
/// 2 * N * (capacity + extra) * embed_dim * sizeof(dtype) bytes.
///
/// Not thread-safe: one cache is one decoding stream; calls that use the same
/// cache must not run concurrently. Movable, not copyable.
///
/// Example:
/// ```
/// auto cache = mha::KVCache::self_attention();
/// attn->eval();
/// auto [y, w] = attn->forward_cached(x, x, x, cache);  // x: (L_new, N, E)
/// ```
class KVCache {
 public:
  /// A causal self-attention cache. `max_len > 0` fixes the capacity (a call
  /// that would exceed it is an error, and steps never allocate cache memory);
  /// `max_len == 0` grows by doubling.
  static KVCache self_attention(int64_t max_len = 0);

  /// A cross-attention cache over a fixed memory (fairseq's `static_kv`).
  static KVCache static_kv();

  KVCache(KVCache&&) noexcept;
  KVCache& operator=(KVCache&&) noexcept;
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;
  ~KVCache();

  /// True for a `static_kv()` cache.
  bool is_static() const;

  /// Cached key positions, not counting the `bias_k` and zero rows.
  int64_t length() const;

  /// Key positions the storage holds without growing (0 before the first call).
  int64_t capacity() const;

  /// Batch size of the cached keys (0 before the first call).
  int64_t batch_size() const;

  /// Bytes held by the key and value buffers (0 before the first call).
  int64_t memory_bytes() const;

  /// Forgets the cached positions (length 0; a static cache takes `key`/`value`
  /// again) and the module it was used with; the storage is kept for reuse.
  void clear();

  /// Selects batch entries: `index` is a 1-D int64 tensor of N' entries in
  /// [0, batch_size()), repeats allowed; N' may differ from N (beam search).
  /// Does nothing before the first call. A filled static cache copies
  /// nothing: its rows then read the memories they were given (beams share
  /// their source's); a masked or weighted call gathers them once. A
  /// float32 or bfloat16 CPU cache reordered within its batch (N' = N) copies
  /// nothing either: it keeps where each row's past lies, one-position
  /// unmasked calls read it in place, and any other call first copies the
  /// rows that moved home.
  void reorder(const torch::Tensor& index);

 private:
  explicit KVCache(std::unique_ptr<detail::KVCacheState> state);
  friend detail::KVCacheState& detail::kv_cache_state(KVCache& cache);

  std::unique_ptr<detail::KVCacheState> state_;
};

}  // namespace mha
