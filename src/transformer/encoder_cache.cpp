// mha::TransformerEncoderCache: a causal TransformerEncoder's per-layer
// self-attention caches, one decoding batch.

#include "common/layer_index.h"
#include "mha/transformer_cache.h"

namespace mha {

TransformerEncoderCache::TransformerEncoderCache(const TransformerEncoderImpl* owner,
                                                 size_t num_layers,
                                                 int64_t max_len)
    : owner_(owner) {
  layers_.reserve(num_layers);
  for (size_t i = 0; i < num_layers; ++i) layers_.push_back(KVCache::self_attention(max_len));
}

int64_t TransformerEncoderCache::length() const {
  return layers_.empty() ? 0 : layers_.front().length();
}

int64_t TransformerEncoderCache::batch_size() const {
  return layers_.empty() ? 0 : layers_.front().batch_size();
}

int64_t TransformerEncoderCache::memory_bytes() const {
  int64_t bytes = 0;
  for (const KVCache& layer : layers_) bytes += layer.memory_bytes();
  return bytes;
}

void TransformerEncoderCache::clear() {
  for (KVCache& layer : layers_) layer.clear();
}

void TransformerEncoderCache::reorder(const torch::Tensor& index) {
  // Every layer holds the same batch, so the first one's checks of `index`
  // pass for all or throw before any layer changes.
  for (KVCache& layer : layers_) layer.reorder(index);
}

KVCache& TransformerEncoderCache::layer(int64_t i) { return detail::layer_at(layers_, i); }

const KVCache& TransformerEncoderCache::layer(int64_t i) const {
  return detail::layer_at(layers_, i);
}

}  // namespace mha
