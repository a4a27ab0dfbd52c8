#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "common/layer_index.h"
#include "mha/transformer_cache.h"

namespace mha {

TransformerDecoderLayerCache::TransformerDecoderLayerCache(int64_t max_len)
    : self_attn(KVCache::self_attention(max_len)), multihead_attn(KVCache::static_kv()) {}

TransformerDecoderCache::TransformerDecoderCache(const TransformerDecoderImpl* owner,
                                                 size_t num_layers,
                                                 int64_t max_len)
    : owner_(owner) {
  layers_.reserve(num_layers);
  for (size_t i = 0; i < num_layers; ++i) {
    layers_.emplace_back(max_len);
  }
}

int64_t TransformerDecoderCache::num_layers() const { return static_cast<int64_t>(layers_.size()); }

int64_t TransformerDecoderCache::length() const {
  return layers_.empty() ? 0 : layers_.front().self_attn.length();
}

int64_t TransformerDecoderCache::memory_length() const {
  return layers_.empty() ? 0 : layers_.front().multihead_attn.length();
}

int64_t TransformerDecoderCache::batch_size() const {
  if (layers_.empty() || memory_length() == 0) return 0;
  return layers_.front().multihead_attn.batch_size();
}

int64_t TransformerDecoderCache::memory_bytes() const {
  int64_t bytes = 0;
  for (const auto& layer : layers_) {
    bytes += layer.self_attn.memory_bytes() + layer.multihead_attn.memory_bytes();
  }
  return bytes;
}

void TransformerDecoderCache::clear() {
  for (auto& layer : layers_) {
    layer.self_attn.clear();
    layer.multihead_attn.clear();
  }
}

void TransformerDecoderCache::reorder(const torch::Tensor& index) {
  // Every cache holds the same batch, so the first one's checks of `index`
  // pass for all or throw before any cache changes.
  for (auto& layer : layers_) {
    layer.multihead_attn.reorder(index);
    layer.self_attn.reorder(index);
  }
}

void TransformerDecoderCache::reorder_decoded(const torch::Tensor& index) {
  TORCH_CHECK_VALUE(
      batch_size() == 0 || !index.defined() || index.dim() != 1 || index.size(0) == batch_size(),
      fmt::format("reorder_decoded: expected index of the cache's batch size {}, "
                  "but got {} entries (reorder() changes the batch size)",
                  batch_size(), index.size(0)));
  for (auto& layer : layers_) layer.self_attn.reorder(index);
}

TransformerDecoderLayerCache& TransformerDecoderCache::layer(int64_t i) {
  return detail::layer_at(layers_, i);
}

const TransformerDecoderLayerCache& TransformerDecoderCache::layer(int64_t i) const {
  return detail::layer_at(layers_, i);
}

}  // namespace mha
