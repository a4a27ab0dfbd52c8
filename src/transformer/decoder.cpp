#include <fmt/format.h>
#include <torch/utils.h>

#include "common/reused_buffers.h"
#include "common/validated_scope.h"
#include "linear/converted_module.h"
#include "linear/int8_linear.h"
#include "mha/transformer_coder.h"
#include "transformer/decoder_cached_checks.h"
#include "transformer/input_checks.h"
#include "transformer/layer_parts.h"
#include "transformer/stack_parts.h"

namespace mha {

using torch::Tensor;

void TransformerDecoderImpl::reset() {
  detail::register_stack_parts(*this, options.decoder_layer(), options.num_layers(),
                               options.norm());
}

Tensor TransformerDecoderImpl::forward(const Tensor& tgt,
                                       const Tensor& memory,
                                       const Tensor& tgt_mask,
                                       const Tensor& memory_mask,
                                       const Tensor& tgt_key_padding_mask,
                                       const Tensor& memory_key_padding_mask,
                                       std::optional<bool> tgt_is_causal,
                                       bool memory_is_causal) {
  TORCH_CHECK(layers->size() > 0, "TransformerDecoder has no layers (num_layers=0)");
  if (!detail::ValidatedScope::covers(this)) {
    detail::check_decoder_inputs(
        *layers->ptr<TransformerDecoderLayerImpl>(0),
        {tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask});
  }
  const detail::ValidatedScope validated(detail::modules_of(layers));
  // Python's `_get_seq_len`: T of a batched or unbatched tgt
  const bool batch_first = options.decoder_layer()->options.batch_first();
  const int64_t seq_len = tgt.dim() == 2 ? tgt.size(0) : tgt.size(batch_first ? 1 : 0);
  const bool causal = detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len);
  const detail::ReusedBuffers reused;  // each layer's large outputs in the last one's blocks
  Tensor output = tgt;                 // (T, N, E) or (N, T, E)
  for (const auto& layer : *layers) {
    output = layer->as<TransformerDecoderLayerImpl>()->forward(
        output, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
        causal, memory_is_causal);
  }
  if (!norm.is_empty()) {
    output = norm.forward(output);
  }
  return output;
}

TransformerDecoderCache TransformerDecoderImpl::make_cache(int64_t max_len) const {
  TORCH_CHECK_VALUE(max_len >= 0,
                    fmt::format("max_len must be >= 0 (0: grow as needed), but got {}", max_len));
  return TransformerDecoderCache(this, layers->size(), max_len);
}

Tensor TransformerDecoderImpl::forward_cached(const Tensor& tgt,
                                              const Tensor& memory,
                                              TransformerDecoderCache& cache,
                                              const Tensor& tgt_key_padding_mask,
                                              const Tensor& memory_key_padding_mask) {
  TORCH_CHECK(layers->size() > 0, "TransformerDecoder has no layers (num_layers=0)");
  TORCH_CHECK(cache.owner() == this && cache.num_layers() == static_cast<int64_t>(layers->size()),
              fmt::format("cache must come from this decoder's make_cache() ({} layers), but it "
                          "was made by another decoder ({} layers)",
                          layers->size(), cache.num_layers()));
  // The step checked once (every layer's caches hold the same positions and
  // batch), then each layer's attention calls once: a bad call fails before
  // the first layer writes its cache.
  if (!detail::ValidatedScope::covers(this)) {
    const Tensor none;
    const detail::DecoderInputs inputs{
        tgt, memory, none, none, tgt_key_padding_mask, memory_key_padding_mask};
    detail::check_cached_step(*layers[0]->as<TransformerDecoderLayerImpl>(), cache.layer(0),
                              inputs);
    for (size_t i = 0; i < layers->size(); ++i) {
      detail::check_cached_attentions(*layers[i]->as<TransformerDecoderLayerImpl>(),
                                      cache.layer(static_cast<int64_t>(i)), inputs);
    }
  }
  const detail::ValidatedScope validated(detail::checked_modules<TransformerDecoderLayerImpl>(
      layers, &TransformerDecoderLayerImpl::self_attn,
      &TransformerDecoderLayerImpl::multihead_attn));
  torch::NoGradGuard no_grad;
  const detail::ReusedBuffers reused;
  Tensor output = tgt;  // (L, N, E) or (N, L, E): the new positions
  for (size_t i = 0; i < layers->size(); ++i) {
    output = layers[i]->as<TransformerDecoderLayerImpl>()->forward_cached(
        output, memory, cache.layer(static_cast<int64_t>(i)), tgt_key_padding_mask,
        memory_key_padding_mask);
  }
  if (!norm.is_empty()) {
    output = norm.forward(output);
  }
  return output;
}

template class detail::ConvertibleModule<TransformerDecoderImpl>;

void TransformerDecoderImpl::pretty_print(std::ostream& stream) const {
  stream << "mha::TransformerDecoder(num_layers=" << options.num_layers() << ")";
}

}  // namespace mha
