#include <fmt/format.h>
#include <torch/utils.h>

#include "common/validated_scope.h"
#include "linear/converted_module.h"
#include "linear/int8_linear.h"
#include "mha/transformer_layers.h"
#include "module/paged_call_checks.h"
#include "transformer/decoder_cached_checks.h"
#include "transformer/input_checks.h"
#include "transformer/layer_parts.h"

namespace mha {

using torch::Tensor;

void TransformerDecoderLayerImpl::reset() {
  options.validate();
  // Python's order of construction: the same seeded init and state_dict() keys.
  self_attn = register_module("self_attn", detail::make_attention(options));
  multihead_attn = register_module("multihead_attn", detail::make_attention(options));
  detail::register_feed_forward(*this, options);
  norm1 = register_module("norm1", detail::make_norm(options));
  norm2 = register_module("norm2", detail::make_norm(options));
  norm3 = register_module("norm3", detail::make_norm(options));
  dropout1 = register_module("dropout1", torch::nn::Dropout(options.dropout()));
  dropout2 = register_module("dropout2", torch::nn::Dropout(options.dropout()));
  dropout3 = register_module("dropout3", torch::nn::Dropout(options.dropout()));
}

Tensor TransformerDecoderLayerImpl::forward(const Tensor& tgt,
                                            const Tensor& memory,
                                            const Tensor& tgt_mask,
                                            const Tensor& memory_mask,
                                            const Tensor& tgt_key_padding_mask,
                                            const Tensor& memory_key_padding_mask,
                                            bool tgt_is_causal,
                                            bool memory_is_causal) {
  if (!detail::ValidatedScope::covers(this)) {
    detail::check_decoder_inputs(
        *this, {tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask});
  }
  const detail::ValidatedScope validated({self_attn.get(), multihead_attn.get()});
  return forward_with(
      tgt,
      [&](const Tensor& x) { return sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal); },
      [&](const Tensor& x) {
        return mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal);
      });
}

Tensor TransformerDecoderLayerImpl::sa_block(const Tensor& x,
                                             const Tensor& attn_mask,
                                             const Tensor& key_padding_mask,
                                             bool is_causal) {
  return detail::self_attention_block(*self_attn, *dropout1, x, attn_mask, key_padding_mask,
                                      is_causal);
}

Tensor TransformerDecoderLayerImpl::mha_block(const Tensor& x,
                                              const Tensor& memory,
                                              const Tensor& attn_mask,
                                              const Tensor& key_padding_mask,
                                              bool is_causal) {
  // x (T, N, E), memory (S, N, E) -> (T, N, E) (batch first likewise)
  const Tensor out =
      std::get<0>(multihead_attn(x, memory, memory, key_padding_mask, /*need_weights=*/false,
                                 attn_mask, /*average_attn_weights=*/true, is_causal));
  return dropout2(out);
}

Tensor TransformerDecoderLayerImpl::ff_block(const Tensor& x) {
  return dropout3(detail::feed_forward(options.activation(), *linear1, *dropout, *linear2, x));
}

Tensor TransformerDecoderLayerImpl::forward_cached(const Tensor& tgt,
                                                   const Tensor& memory,
                                                   TransformerDecoderLayerCache& cache,
                                                   const Tensor& tgt_key_padding_mask,
                                                   const Tensor& memory_key_padding_mask) {
  // The step and both attention calls checked before either writes its cache,
  // unless a stack step checked them; then neither module checks again.
  if (!detail::ValidatedScope::covers(this)) {
    const Tensor none;
    const detail::DecoderInputs inputs{
        tgt, memory, none, none, tgt_key_padding_mask, memory_key_padding_mask};
    detail::check_cached_step(*this, cache, inputs);
    detail::check_cached_attentions(*this, cache, inputs);
  }
  const detail::ValidatedScope checked({self_attn.get(), multihead_attn.get()});
  torch::NoGradGuard no_grad;
  // The first call projects the memory into the cache; later calls read it there.
  const Tensor new_memory = cache.multihead_attn.length() > 0 ? Tensor() : memory;
  return forward_with(
      tgt,  // the new positions
      [&](const Tensor& x) { return sa_block_cached(x, cache.self_attn, tgt_key_padding_mask); },
      [&](const Tensor& x) {
        return mha_block_cached(x, new_memory, cache.multihead_attn, memory_key_padding_mask);
      });
}

Tensor TransformerDecoderLayerImpl::forward_paged(const Tensor& tgt,
                                                  const Tensor& memory,
                                                  PagedKVCache& self_cache,
                                                  PagedKVCache& cross_cache,
                                                  const std::vector<int64_t>& seq_ids,
                                                  const Tensor& cu_seqlens,
                                                  const Tensor& cu_seqlens_memory) {
  // Both calls checked before the first writes its cache (same rows, ids,
  // offsets), unless a stack step checked them; then neither module checks again.
  if (!detail::ValidatedScope::covers(this)) {
    const Tensor none;
    detail::check_paged_call(*self_attn, self_cache, {tgt, tgt, tgt, seq_ids, cu_seqlens, none});
    detail::check_paged_call(*multihead_attn, cross_cache,
                             {tgt, memory, memory, seq_ids, cu_seqlens, cu_seqlens_memory});
  }
  const detail::ValidatedScope checked({self_attn.get(), multihead_attn.get()});
  torch::NoGradGuard no_grad;
  auto self_block = [&](const Tensor& x) {  // (T, E) -> (T, E)
    return std::get<0>(self_attn->forward_paged(x, x, x, self_cache, seq_ids, cu_seqlens));
  };
  auto cross_block = [&](const Tensor& x) {  // (T, E) -> (T, E)
    return std::get<0>(multihead_attn->forward_paged(x, memory, memory, cross_cache, seq_ids,
                                                     cu_seqlens, cu_seqlens_memory));
  };
  return forward_with(tgt, self_block, cross_block);  // (T, E)
}

Tensor TransformerDecoderLayerImpl::forward_with(
    const Tensor& tgt,
    const std::function<Tensor(const Tensor&)>& self_block,
    const std::function<Tensor(const Tensor&)>& cross_block) {
  return detail::residual_sublayers(tgt, options.norm_first(),
                                    {{*norm1, self_block},
                                     {*norm2, cross_block},
                                     {*norm3, [this](const Tensor& x) { return ff_block(x); }}});
}

Tensor TransformerDecoderLayerImpl::sa_block_cached(const Tensor& x,
                                                    KVCache& cache,
                                                    const Tensor& key_padding_mask) {
  // x (L, N, E) or (N, L, E): the new positions; their keys are appended to the cache
  return std::get<0>(self_attn->forward_cached(x, x, x, cache, key_padding_mask));
}

Tensor TransformerDecoderLayerImpl::mha_block_cached(const Tensor& x,
                                                     const Tensor& memory,
                                                     KVCache& cache,
                                                     const Tensor& key_padding_mask) {
  // x (L, N, E), memory (S, N, E) or undefined (cached) -> (L, N, E) (batch first likewise)
  return std::get<0>(multihead_attn->forward_cached(x, memory, memory, cache, key_padding_mask));
}

template class detail::ConvertibleModule<TransformerDecoderLayerImpl>;

void TransformerDecoderLayerImpl::pretty_print(std::ostream& stream) const {
  detail::print_layer_options(stream, "mha::TransformerDecoderLayer", options);
}

}  // namespace mha
