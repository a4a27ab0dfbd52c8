// The stacks' paged decoding: TransformerEncoderImpl and TransformerDecoderImpl
// make_paged_cache (one block table for all layers) and forward_paged (every
// layer's call checked, each block table grown once, then the layers).

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "cache/paged_call_checks.h"
#include "cache/paged_stack_step.h"
#include "mha/paged_kv_cache.h"
#include "mha/transformer.h"

namespace mha {

using torch::Tensor;

namespace {

constexpr const char* kPagedStackFix = "release() finished sequences or give the cache more blocks";

/// `cache` (the argument `name`): one per layer of `stack` (its class name).
void check_paged_stack_caches(const char* stack,
                              size_t layers,
                              const std::vector<PagedKVCache>& cache,
                              const char* name) {
  TORCH_CHECK(layers > 0, stack, " has no layers (num_layers=0)");
  TORCH_CHECK_VALUE(cache.size() == layers,
                    fmt::format("expected {} to hold one cache per layer ({}), but got {}", name,
                                layers, cache.size()));
}

/// The self-attention of each layer of `layers`, a ModuleList of `Layer`s.
template <typename Layer>
std::vector<const MultiheadAttentionImpl*> self_attentions(const torch::nn::ModuleList& layers) {
  std::vector<const MultiheadAttentionImpl*> modules;
  for (const auto& layer : *layers) modules.push_back(layer->as<Layer>()->self_attn.get());
  return modules;
}

}  // namespace

std::vector<PagedKVCache> TransformerEncoderImpl::make_paged_cache(
    const PagedKVCacheOptions& options) const {
  return PagedKVCache::for_layers(self_attentions<TransformerEncoderLayerImpl>(layers), options);
}

Tensor TransformerEncoderImpl::forward_paged(const Tensor& src,
                                             std::vector<PagedKVCache>& cache,
                                             const std::vector<int64_t>& seq_ids,
                                             const Tensor& cu_seqlens) {
  check_paged_stack_caches("TransformerEncoder", layers->size(), cache, "cache");
  auto attn = [&](size_t i) -> const MultiheadAttentionImpl& {
    return *layers[i]->as<TransformerEncoderLayerImpl>()->self_attn;
  };
  // Every layer's call checked (offsets copied to the host once), then the
  // room of each distinct block table once, before any cache changes.
  const detail::PagedOffsets offsets =
      detail::check_paged_layer(attn(0), cache[0], src, src, src, seq_ids, cu_seqlens, Tensor());
  for (size_t i = 1; i < layers->size(); ++i) {
    detail::check_paged_layer(attn(i), cache[i], src, src, src, seq_ids, cu_seqlens, Tensor(),
                              &offsets);
  }
  detail::PagedStackStep step(seq_ids);
  step.check(cache, offsets, kPagedStackFix);
  step.open();          // each table grown once; the layers write their pools at its rows
  Tensor output = src;  // (T, E)
  for (size_t i = 0; i < layers->size(); ++i) {
    output = layers[i]->as<TransformerEncoderLayerImpl>()->forward_paged(output, cache[i], seq_ids,
                                                                         cu_seqlens);
  }
  return norm.is_empty() ? output : norm.forward(output);
}

std::vector<PagedKVCache> TransformerDecoderImpl::make_paged_cache(
    const PagedKVCacheOptions& options) const {
  PagedKVCacheOptions self_options = options;
  return PagedKVCache::for_layers(self_attentions<TransformerDecoderLayerImpl>(layers),
                                  self_options.static_kv(false));
}

std::vector<PagedKVCache> TransformerDecoderImpl::make_paged_memory_cache(
    const PagedKVCacheOptions& options) const {
  std::vector<const MultiheadAttentionImpl*> modules;
  for (const auto& layer : *layers) {
    modules.push_back(layer->as<TransformerDecoderLayerImpl>()->multihead_attn.get());
  }
  PagedKVCacheOptions memory_options = options;
  return PagedKVCache::for_layers(modules, memory_options.static_kv(true));
}

Tensor TransformerDecoderImpl::forward_paged(const Tensor& tgt,
                                             const Tensor& memory,
                                             std::vector<PagedKVCache>& self_cache,
                                             std::vector<PagedKVCache>& cross_cache,
                                             const std::vector<int64_t>& seq_ids,
                                             const Tensor& cu_seqlens,
                                             const Tensor& cu_seqlens_memory) {
  check_paged_stack_caches("TransformerDecoder", layers->size(), self_cache, "self_cache");
  check_paged_stack_caches("TransformerDecoder", layers->size(), cross_cache, "cross_cache");
  auto layer = [&](size_t i) -> TransformerDecoderLayerImpl& {
    return *layers[i]->as<TransformerDecoderLayerImpl>();
  };
  // Layer 0's calls give the offsets (copied to the host once per step).
  const detail::PagedOffsets self_offsets = detail::check_paged_layer(
      *layer(0).self_attn, self_cache[0], tgt, tgt, tgt, seq_ids, cu_seqlens, Tensor());
  const detail::PagedOffsets cross_offsets =
      detail::check_paged_layer(*layer(0).multihead_attn, cross_cache[0], tgt, memory, memory,
                                seq_ids, cu_seqlens, cu_seqlens_memory);
  for (size_t i = 1; i < layers->size(); ++i) {
    detail::check_paged_layer(*layer(i).self_attn, self_cache[i], tgt, tgt, tgt, seq_ids,
                              cu_seqlens, Tensor(), &self_offsets);
    detail::check_paged_layer(*layer(i).multihead_attn, cross_cache[i], tgt, memory, memory,
                              seq_ids, cu_seqlens, cu_seqlens_memory, &cross_offsets);
  }
  detail::PagedStackStep step(seq_ids);
  step.check(self_cache, self_offsets, kPagedStackFix);
  step.check(cross_cache, cross_offsets, kPagedStackFix);
  step.open();     // each table grown once; the layers write their pools at its rows
  Tensor x = tgt;  // (T, E)
  for (size_t i = 0; i < layers->size(); ++i) {
    x = layer(i).forward_paged(x, memory, self_cache[i], cross_cache[i], seq_ids, cu_seqlens,
                               cu_seqlens_memory);
  }
  return norm.is_empty() ? x : norm.forward(x);
}

}  // namespace mha
