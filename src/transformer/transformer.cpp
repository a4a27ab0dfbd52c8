#include "mha/transformer.h"

#include <fmt/format.h>
#include <torch/nn/init.h>

#include <typeinfo>
#include <vector>

#include "common/shape_format.h"
#include "common/validated_scope.h"
#include "linear/converted_module.h"
#include "linear/int8_linear.h"
#include "transformer/input_checks.h"
#include "transformer/layer_parts.h"

namespace mha {

using torch::Tensor;

namespace {

TransformerLayerOptions layer_options(const TransformerOptions& o) {
  return TransformerLayerOptions(o.d_model(), o.nhead())
      .dim_feedforward(o.dim_feedforward())
      .dropout(o.dropout())
      .activation(o.activation())
      .layer_norm_eps(o.layer_norm_eps())
      .batch_first(o.batch_first())
      .norm_first(o.norm_first())
      .bias(o.bias());
}

/// Python's `Transformer.forward` checks: the same batch and d_model features.
void check_src_and_tgt(const TransformerOptions& options, const Tensor& src, const Tensor& tgt) {
  TORCH_CHECK(src.defined() && tgt.defined(), "src and tgt must be defined tensors");
  const int64_t batch_dim = options.batch_first() ? 0 : 1;
  if (src.dim() == 3) {  // batched
    TORCH_CHECK(tgt.dim() > batch_dim && src.size(batch_dim) == tgt.size(batch_dim),
                fmt::format("the batch number of src and tgt must be equal, but got src of "
                            "shape {} and tgt of shape {} (batch_first={})",
                            detail::torch_size(src.sizes()), detail::torch_size(tgt.sizes()),
                            options.batch_first()));
  }
  TORCH_CHECK(src.size(-1) == options.d_model() && tgt.size(-1) == options.d_model(),
              fmt::format("the feature number of src and tgt must be equal to d_model={} "
                          "(src: {}, tgt: {})",
                          options.d_model(), src.size(-1), tgt.size(-1)));
}

LayerNorm final_norm(const TransformerOptions& o) {
  return LayerNorm(LayerNormOptions({o.d_model()}).eps(o.layer_norm_eps()).bias(o.bias()));
}

/// `custom` as given (a copy that draws no random numbers: Python uses the
/// module itself), else a new `Stack` of `num_layers` `Layer`s and the final
/// norm, built in Python's order (layer, norm, then the layer's clones).
template <typename Stack, typename StackOptions, typename Layer>
torch::nn::AnyModule stack_or_custom(const torch::nn::AnyModule& custom,
                                     const TransformerOptions& options,
                                     int64_t num_layers) {
  if (!custom.is_empty()) {
    const detail::NoDrawsGuard no_draws;
    return custom.clone();
  }
  Layer layer(layer_options(options));
  LayerNorm norm = final_norm(options);
  return torch::nn::AnyModule(
      Stack(StackOptions(layer, num_layers).norm(torch::nn::AnyModule(norm))));
}

}  // namespace

void TransformerImpl::reset() {
  // Python's order: encoder layer, encoder norm, (clones), decoder layer, decoder norm.
  encoder = stack_or_custom<TransformerEncoder, TransformerEncoderOptions, TransformerEncoderLayer>(
      options.custom_encoder(), options, options.num_encoder_layers());
  register_module("encoder", encoder.ptr());
  decoder = stack_or_custom<TransformerDecoder, TransformerDecoderOptions, TransformerDecoderLayer>(
      options.custom_decoder(), options, options.num_decoder_layers());
  register_module("decoder", decoder.ptr());
  reset_parameters();
}

void TransformerImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (auto& p : parameters()) {
    if (p.dim() > 1) torch::nn::init::xavier_uniform_(p);
  }
}

Tensor TransformerImpl::forward(const Tensor& src,
                                const Tensor& tgt,
                                const Tensor& src_mask,
                                const Tensor& tgt_mask,
                                const Tensor& memory_mask,
                                const Tensor& src_key_padding_mask,
                                const Tensor& tgt_key_padding_mask,
                                const Tensor& memory_key_padding_mask,
                                std::optional<bool> src_is_causal,
                                std::optional<bool> tgt_is_causal,
                                bool memory_is_causal) {
  check_src_and_tgt(options, src, tgt);
  // With mha's own encoder and decoder, every input is checked here, with this
  // call's names, and the stacks and layers below do not check again: src and
  // its masks before encoding, tgt and the rest against the memory encoded.
  const auto* enc = dynamic_cast<const TransformerEncoderImpl*>(encoder.ptr().get());
  const auto* dec = dynamic_cast<const TransformerDecoderImpl*>(decoder.ptr().get());
  const bool own_encoder =
      enc && typeid(*enc) == typeid(TransformerEncoderImpl) && !enc->layers->is_empty();
  const bool own_decoder =
      dec && typeid(*dec) == typeid(TransformerDecoderImpl) && !dec->layers->is_empty();
  Tensor memory;
  {
    if (own_encoder) {
      detail::check_encoder_inputs(*enc->layers->ptr<TransformerEncoderLayerImpl>(0), src, src_mask,
                                   "src_mask", src_key_padding_mask);
    }
    const detail::ValidatedScope validated(own_encoder ? std::vector<const torch::nn::Module*>{enc}
                                                       : std::vector<const torch::nn::Module*>{});
    memory = encode(src, src_mask, src_key_padding_mask, src_is_causal);  // shaped as src
  }
  if (own_decoder) {
    detail::check_decoder_inputs(
        *dec->layers->ptr<TransformerDecoderLayerImpl>(0),
        {tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask});
  }
  const detail::ValidatedScope validated(own_decoder ? std::vector<const torch::nn::Module*>{dec}
                                                     : std::vector<const torch::nn::Module*>{});
  return decoder.forward<Tensor>(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                                 memory_key_padding_mask, tgt_is_causal, memory_is_causal);
}

Tensor TransformerImpl::encode(const Tensor& src,
                               const Tensor& src_mask,
                               const Tensor& src_key_padding_mask,
                               std::optional<bool> src_is_causal) const {
  // A second handle on the same encoder module: AnyModule::forward is not const.
  torch::nn::AnyModule same_encoder = encoder;
  // memory: shaped as src
  return same_encoder.forward<Tensor>(src, src_mask, src_key_padding_mask, src_is_causal);
}

TransformerDecoderImpl& TransformerImpl::cached_decoder() const {
  auto* built = dynamic_cast<TransformerDecoderImpl*>(decoder.ptr().get());
  TORCH_CHECK(built != nullptr,
              "decode_cached needs a mha::TransformerDecoder as the decoder, but custom_decoder "
              "is another module");
  return *built;
}

TransformerDecoderCache TransformerImpl::make_decoder_cache(int64_t max_len) const {
  return cached_decoder().make_cache(max_len);
}

Tensor TransformerImpl::decode_cached(const Tensor& tgt,
                                      const Tensor& memory,
                                      TransformerDecoderCache& cache,
                                      const Tensor& tgt_key_padding_mask,
                                      const Tensor& memory_key_padding_mask) {
  // tgt: the new positions -> their output, shaped as tgt
  return cached_decoder().forward_cached(tgt, memory, cache, tgt_key_padding_mask,
                                         memory_key_padding_mask);
}

Tensor TransformerImpl::generate_square_subsequent_mask(int64_t sz,
                                                        const torch::TensorOptions& options) {
  return mha::generate_square_subsequent_mask(sz, options);
}

template class detail::ConvertibleModule<TransformerImpl>;

void TransformerImpl::pretty_print(std::ostream& stream) const {
  stream << fmt::format(
      "mha::Transformer(d_model={}, nhead={}, num_encoder_layers={}, num_decoder_layers={}, "
      "batch_first={}, norm_first={}, bias={})",
      options.d_model(), options.nhead(), options.num_encoder_layers(),
      options.num_decoder_layers(), options.batch_first(), options.norm_first(), options.bias());
}

}  // namespace mha
