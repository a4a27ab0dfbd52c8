#pragma once

// Incremental decoding for mha::TransformerDecoderLayer and
// mha::TransformerDecoder: one KVCache per attention of each layer. See
// docs/transformer.md, "Incremental decoding".

#include <mha/kv_cache.h>
#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mha {

class TransformerDecoderImpl;

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
