// The stacks' paged decoding: TransformerEncoderImpl and TransformerDecoderImpl
// make_paged_cache (one block table for all layers) and forward_paged: every
// layer's call checked once, each block table's room counted once, each table
// grown once, then the layers and their attention modules under a
// ValidatedScope (none checks again).

#include "transformer/stack_paged.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "cache/paged_stack_step.h"
#include "common/reused_buffers.h"
#include "common/validated_scope.h"
#include "module/paged_call_checks.h"

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

Tensor detail::encoder_paged_step(TransformerEncoderImpl& stack,
                                  const Tensor& src,
                                  std::vector<PagedKVCache>& cache,
                                  const std::vector<int64_t>& seq_ids,
                                  const Tensor& cu_seqlens,
                                  const char* fix) {
  torch::nn::ModuleList& layers = stack.layers;
  check_paged_stack_caches("TransformerEncoder", layers->size(), cache, "cache");
  auto layer = [&](size_t i) -> TransformerEncoderLayerImpl& {
    return *layers[i]->as<TransformerEncoderLayerImpl>();
  };
  // Every layer's call checked once (offsets copied to the host once), then
  // the room of each distinct block table once, before any cache changes.
  const Tensor none;
  const PagedCall call{src, src, src, seq_ids, cu_seqlens, none};
  const PagedOffsets offsets = check_paged_layer(*layer(0).self_attn, cache[0], call);
  for (size_t i = 1; i < layers->size(); ++i) {
    check_paged_layer(*layer(i).self_attn, cache[i], call, &offsets);
  }
  PagedStackStep step(seq_ids);
  step.check(cache, offsets, fix);
  step.open();  // each table grown once; the layers write their pools at its rows
  const ValidatedScope checked(checked_modules<TransformerEncoderLayerImpl>(
      layers, &TransformerEncoderLayerImpl::self_attn));
  const ReusedBuffers reused;
  Tensor output = src;  // (T, E)
  for (size_t i = 0; i < layers->size(); ++i) {
    output = layer(i).forward_paged(output, cache[i], seq_ids, cu_seqlens);
  }
  return stack.norm.is_empty() ? output : stack.norm.forward(output);
}

Tensor detail::decoder_paged_step(TransformerDecoderImpl& decoder,
                                  const Tensor& tgt,
                                  const Tensor& memory,
                                  std::vector<PagedKVCache>& self_cache,
                                  std::vector<PagedKVCache>& cross_cache,
                                  const std::vector<int64_t>& seq_ids,
                                  const Tensor& cu_seqlens,
                                  const Tensor& cu_seqlens_memory,
                                  const char* fix) {
  torch::nn::ModuleList& layers = decoder.layers;
  check_paged_stack_caches("TransformerDecoder", layers->size(), self_cache, "self_cache");
  check_paged_stack_caches("TransformerDecoder", layers->size(), cross_cache, "cross_cache");
  auto layer = [&](size_t i) -> TransformerDecoderLayerImpl& {
    return *layers[i]->as<TransformerDecoderLayerImpl>();
  };
  // Every layer's two calls checked once; layer 0's give the offsets
  // (copied to the host once per step).
  const Tensor none;
  const PagedCall self_call{tgt, tgt, tgt, seq_ids, cu_seqlens, none};
  const PagedCall cross_call{tgt, memory, memory, seq_ids, cu_seqlens, cu_seqlens_memory};
  const PagedOffsets self_offsets =
      check_paged_layer(*layer(0).self_attn, self_cache[0], self_call);
  const PagedOffsets cross_offsets =
      check_paged_layer(*layer(0).multihead_attn, cross_cache[0], cross_call);
  for (size_t i = 1; i < layers->size(); ++i) {
    check_paged_layer(*layer(i).self_attn, self_cache[i], self_call, &self_offsets);
    check_paged_layer(*layer(i).multihead_attn, cross_cache[i], cross_call, &cross_offsets);
  }
  PagedStackStep step(seq_ids);
  step.check(self_cache, self_offsets, fix);
  step.check(cross_cache, cross_offsets, fix);
  step.open();  // each table grown once; the layers write their pools at its rows
  const ValidatedScope checked(
      checked_modules<TransformerDecoderLayerImpl>(layers, &TransformerDecoderLayerImpl::self_attn,
                                                   &TransformerDecoderLayerImpl::multihead_attn));
  const ReusedBuffers reused;
  Tensor x = tgt;  // (T, E)
  for (size_t i = 0; i < layers->size(); ++i) {
    x = layer(i).forward_paged(x, memory, self_cache[i], cross_cache[i], seq_ids, cu_seqlens,
                               cu_seqlens_memory);
  }
  return decoder.norm.is_empty() ? x : decoder.norm.forward(x);
}

PagedStackCache TransformerEncoderImpl::make_paged_cache(const PagedKVCacheOptions& options) const {
  PagedKVCacheOptions self_options = options;
  return PagedStackCache(self_attentions<TransformerEncoderLayerImpl>(layers),
                         self_options.static_kv(false));
}

Tensor TransformerEncoderImpl::forward_paged(const Tensor& src,
                                             PagedStackCache& cache,
                                             const std::vector<int64_t>& seq_ids,
                                             const Tensor& cu_seqlens) {
  return detail::encoder_paged_step(*this, src, detail::stack_layers(cache), seq_ids, cu_seqlens,
                                    kPagedStackFix);
}

PagedStackCache TransformerDecoderImpl::make_paged_cache(const PagedKVCacheOptions& options) const {
  PagedKVCacheOptions self_options = options;
  return PagedStackCache(self_attentions<TransformerDecoderLayerImpl>(layers),
                         self_options.static_kv(false));
}

PagedStackCache TransformerDecoderImpl::make_paged_memory_cache(
    const PagedKVCacheOptions& options) const {
  std::vector<const MultiheadAttentionImpl*> modules;
  for (const auto& layer : *layers) {
    modules.push_back(layer->as<TransformerDecoderLayerImpl>()->multihead_attn.get());
  }
  PagedKVCacheOptions memory_options = options;
  return PagedStackCache(modules, memory_options.static_kv(true));
}

Tensor TransformerDecoderImpl::forward_paged(const Tensor& tgt,
                                             const Tensor& memory,
                                             PagedStackCache& self_cache,
                                             PagedStackCache& cross_cache,
                                             const std::vector<int64_t>& seq_ids,
                                             const Tensor& cu_seqlens,
                                             const Tensor& cu_seqlens_memory) {
  return detail::decoder_paged_step(*this, tgt, memory, detail::stack_layers(self_cache),
                                    detail::stack_layers(cross_cache), seq_ids, cu_seqlens,
                                    cu_seqlens_memory, kPagedStackFix);
}

}  // namespace mha
