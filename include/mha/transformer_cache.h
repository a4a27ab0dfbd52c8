#pragma once

// Incremental decoding for the stacks: a causal mha::TransformerEncoder's
// one KVCache per layer, and mha::TransformerDecoderLayer's and
// mha::TransformerDecoder's one KVCache per attention of each layer. See
// docs/transformer.md, "Incremental decoding".

#include <mha/kv_cache.h>
#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace mha {

class TransformerDecoderImpl;
class TransformerEncoderImpl;

/// The per-layer self-attention caches of one decoding batch of a causal
/// (decoder-only) `mha::TransformerEncoder`, made by
/// `TransformerEncoderImpl::make_cache` and filled by
/// `TransformerEncoderImpl::forward_cached`. Not thread-safe (one decoding
/// stream); movable, not copyable.
///
/// Memory: 2 * N * E * sizeof(dtype) bytes per layer and cached position.
class TransformerEncoderCache {
 public:
  TransformerEncoderCache(TransformerEncoderCache&&) noexcept = default;
  TransformerEncoderCache& operator=(TransformerEncoderCache&&) noexcept = default;
  TransformerEncoderCache(const TransformerEncoderCache&) = delete;
  TransformerEncoderCache& operator=(const TransformerEncoderCache&) = delete;

  /// Number of layers (the stack's).
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  /// Cached positions (the same in every layer).
  int64_t length() const;
  /// Batch size (0 before the first call).
  int64_t batch_size() const;
  /// Bytes held by every layer's key and value buffers.
  int64_t memory_bytes() const;
  /// Forgets the cached positions; the storage is kept.
  void clear();
  /// Selects batch entries in every layer (beam search): `index` is a 1-D
  /// int64 tensor of N' entries in [0, batch_size()), repeats allowed. The
  /// next calls take batch N' (and a key padding mask reordered the same way).
  void reorder(const torch::Tensor& index);

  /// The cache of layer `i`, for `TransformerEncoderLayerImpl::forward_cached`.
  KVCache& layer(int64_t i);
  /// See the non-const overload.
  const KVCache& layer(int64_t i) const;
  /// The stack that made this cache.
  const TransformerEncoderImpl* owner() const { return owner_; }

 private:
  friend class TransformerEncoderImpl;
  TransformerEncoderCache(const TransformerEncoderImpl* owner, size_t num_layers, int64_t max_len);
  /// The per-layer caches, for the stack's own steps.
  std::vector<KVCache>& layers() { return layers_; }

  const TransformerEncoderImpl* owner_;
  std::vector<KVCache> layers_;
};

/// The caches of one `mha::TransformerDecoderLayer`, filled by
/// `TransformerDecoderLayerImpl::forward_cached`: the causal self-attention's
/// keys and values (one row per decoded position) and the cross-attention's
/// projected memory (computed on the first call, reused afterwards).
struct TransformerDecoderLayerCache {
  /// `max_len > 0` fixes the self-attention capacity (see `KVCache::self_attention`).
  explicit TransformerDecoderLayerCache(int64_t max_len = 0);

  /// Cache of `self_attn`: the decoded positions.
  KVCache self_attn;
  /// Cache of `multihead_attn`: the projected memory.
  KVCache multihead_attn;
};

/// The per-layer caches of one decoding batch of a `mha::TransformerDecoder`,
/// made by `TransformerDecoderImpl::make_cache` and filled by
/// `TransformerDecoderImpl::forward_cached`. Not thread-safe (one decoding
/// stream); movable, not copyable.
///
/// Memory: 2 * N * E * sizeof(dtype) bytes per layer and position, for the
/// self-attention capacity plus the S memory positions.
class TransformerDecoderCache {
 public:
  TransformerDecoderCache(TransformerDecoderCache&&) noexcept = default;
  TransformerDecoderCache& operator=(TransformerDecoderCache&&) noexcept = default;
  TransformerDecoderCache(const TransformerDecoderCache&) = delete;
  TransformerDecoderCache& operator=(const TransformerDecoderCache&) = delete;

  /// Number of layers (the decoder's).
  int64_t num_layers() const;
  /// Decoded (cached) target positions.
  int64_t length() const;
  /// Memory positions S held by the cross-attention caches (0 before the first call).
  int64_t memory_length() const;
  /// Batch size (0 before the first call).
  int64_t batch_size() const;
  /// Bytes held by every layer's key and value buffers.
  int64_t memory_bytes() const;
  /// Forgets the decoded positions and the memory; the storage is kept.
  void clear();
  /// Selects batch entries in every layer (beam search): `index` is a 1-D
  /// int64 tensor of N' entries in [0, batch_size()), repeats allowed. The
  /// next calls take batch N' (pass `memory` reordered the same way, or undefined).
  void reorder(const torch::Tensor& index);
  /// `reorder` of the decoded positions only, keeping the cross-attention
  /// caches: for beam search where `index` (N entries, N the batch size)
  /// maps every row to a row of the same memory (each source's beams hold
  /// the same projected memory), it copies N x length rows per layer instead
  /// of N x (length + S).
  void reorder_decoded(const torch::Tensor& index);

  /// The caches of layer `i`, for `TransformerDecoderLayerImpl::forward_cached`.
  TransformerDecoderLayerCache& layer(int64_t i);
  /// See the non-const overload.
  const TransformerDecoderLayerCache& layer(int64_t i) const;
  /// The decoder that made this cache.
  const TransformerDecoderImpl* owner() const { return owner_; }

 private:
  friend class TransformerDecoderImpl;
  TransformerDecoderCache(const TransformerDecoderImpl* owner, size_t num_layers, int64_t max_len);

  const TransformerDecoderImpl* owner_;
  std::vector<TransformerDecoderLayerCache> layers_;
};

}  // namespace mha
