#include "attention/masks.h"
#include "common/validated_scope.h"
#include "linear/converted_module.h"
#include "linear/int8_linear.h"
#include "mha/transformer_layers.h"
#include "module/packed_self_attention.h"
#include "transformer/encoder_layer_fast_path.h"
#include "transformer/input_checks.h"
#include "transformer/layer_parts.h"

namespace mha {

using torch::Tensor;

void TransformerEncoderLayerImpl::reset() {
  options.validate();
  // Python's order of construction: the same seeded init and state_dict() keys.
  self_attn = register_module("self_attn", detail::make_attention(options));
  detail::register_feed_forward(*this, options);
  norm1 = register_module("norm1", detail::make_norm(options));
  norm2 = register_module("norm2", detail::make_norm(options));
  dropout1 = register_module("dropout1", torch::nn::Dropout(options.dropout()));
  dropout2 = register_module("dropout2", torch::nn::Dropout(options.dropout()));
}

Tensor TransformerEncoderLayerImpl::forward(const Tensor& src,
                                            const Tensor& src_mask,
                                            const Tensor& src_key_padding_mask,
                                            bool is_causal) {
  if (!detail::ValidatedScope::covers(this)) {
    detail::check_encoder_inputs(*this, src, src_mask, "src_mask", src_key_padding_mask);
  }
  const detail::ValidatedScope validated({self_attn.get()});
  const auto dtype = src.scalar_type();
  const Tensor kpm = detail::canonical_key_padding_mask(src_key_padding_mask, src_mask, dtype,
                                                        {"src_key_padding_mask", "src_mask"});
  const Tensor mask = detail::canonical_attn_mask(src_mask, dtype, "src_mask");

  if (detail::why_not_layer_fast_path(*this, src, mask, kpm).empty() &&
      !detail::layer_takes_mha_kernels(*this, src, mask, kpm)) {
    return detail::layer_fast_path(*this, src, mask, kpm);
  }
  return forward_with(src, [&](const Tensor& x) { return sa_block(x, mask, kpm, is_causal); });
}

Tensor TransformerEncoderLayerImpl::sa_block(const Tensor& x,
                                             const Tensor& attn_mask,
                                             const Tensor& key_padding_mask,
                                             bool is_causal) {
  return detail::self_attention_block(*self_attn, *dropout1, x, attn_mask, key_padding_mask,
                                      is_causal);
}

Tensor TransformerEncoderLayerImpl::forward_cached(const Tensor& src,
                                                   KVCache& cache,
                                                   const Tensor& key_padding_mask) {
  torch::NoGradGuard no_grad;
  auto self_block = [&](const Tensor& x) {  // the new positions, appended to the cache
    return std::get<0>(self_attn->forward_cached(x, x, x, cache, key_padding_mask));
  };
  return forward_with(src, self_block);
}

Tensor TransformerEncoderLayerImpl::forward_paged(const Tensor& src,
                                                  PagedKVCache& cache,
                                                  const std::vector<int64_t>& seq_ids,
                                                  const Tensor& cu_seqlens) {
  torch::NoGradGuard no_grad;
  auto self_block = [&](const Tensor& x) {  // (T, E) -> (T, E)
    return std::get<0>(self_attn->forward_paged(x, x, x, cache, seq_ids, cu_seqlens));
  };
  return forward_with(src, self_block);
}

Tensor TransformerEncoderLayerImpl::forward_packed(const Tensor& src, const Tensor& cu_seqlens) {
  const std::vector<int64_t> offsets =
      detail::checked_packed_offsets(*self_attn, src, cu_seqlens, "forward_packed");
  torch::NoGradGuard no_grad;
  auto self_block = [&](const Tensor& x) {  // (T, E) -> (T, E)
    return detail::packed_self_attention(*self_attn, x, offsets);
  };
  return forward_with(src, self_block);
}

Tensor TransformerEncoderLayerImpl::forward_with(
    const Tensor& src, const std::function<Tensor(const Tensor&)>& self_block) {
  // Python's forward without the fast path
  return detail::residual_sublayers(
      src, options.norm_first(),
      {{*norm1, self_block}, {*norm2, [this](const Tensor& x) { return ff_block(x); }}});
}

Tensor TransformerEncoderLayerImpl::ff_block(const Tensor& x) {
  return dropout2(detail::feed_forward(options.activation(), *linear1, *dropout, *linear2, x));
}

template class detail::ConvertibleModule<TransformerEncoderLayerImpl>;

void TransformerEncoderLayerImpl::pretty_print(std::ostream& stream) const {
  detail::print_layer_options(stream, "mha::TransformerEncoderLayer", options);
}

}  // namespace mha
