// mha::Seq2SeqLM: BART, mBART and Marian around mha::Transformer
// (transformers 5.23, models/{bart,mbart,marian}/modeling_*.py): scaled token
// embeddings, learned positions from row 2 or Marian's sinusoids, the
// embedding LayerNorm, the tied LM head and final_logits_bias.

#include <c10/util/Exception.h>
#include <mha/hf_language_models.h>
#include <mha/kernel_switches.h>
#include <mha/quantization.h>
#include <torch/types.h>

#include <cmath>

#include "hugging_face/models/model_inputs.h"
#include "linear/converted_module.h"
#include "linear/int8_linear.h"
#include "linear/packed_linear.h"
#include "linear/packed_weight.h"

namespace mha {

using torch::Tensor;

namespace {

/// A stack's final LayerNorm (mbart), or none.
torch::nn::AnyModule final_norm(const TransformerLayerOptions& layer, bool present) {
  if (!present) {
    return {};
  }
  return torch::nn::AnyModule(
      LayerNorm(LayerNormOptions({layer.d_model()}).eps(layer.layer_norm_eps())));
}

TransformerLayerOptions batch_first(TransformerLayerOptions layer) {
  layer.batch_first(true);
  return layer;
}

/// `norm`'s forward from a const model (the module computes without changing).
Tensor apply_norm(const LayerNorm& norm, const Tensor& x) { return norm.ptr()->forward(x); }

/// `model`'s decoder token embeddings: its own where untied, else the shared ones.
const torch::nn::Embedding& decoder_tokens(const Seq2SeqLMImpl& model) {
  return model.decoder_embed_tokens ? model.decoder_embed_tokens : model.shared;
}

/// `model`'s decoder stack, the `TransformerDecoder` its constructor builds.
TransformerDecoderImpl& decoder_stack(const Seq2SeqLMImpl& model) {
  return *model.transformer->decoder.ptr<TransformerDecoderImpl>();
}

}  // namespace

void Seq2SeqLMImpl::reset() {
  const int64_t width = options.encoder_layer().d_model();
  // bart, mbart: learned positions from row 2 (BartLearnedPositionalEmbedding's offset).
  const int64_t rows = options.max_position_embeddings() + (options.sinusoidal_positions() ? 0 : 2);
  shared = register_module("shared", torch::nn::Embedding(options.vocab_size(), width));
  if (!options.tie_word_embeddings()) {
    decoder_embed_tokens =
        register_module("decoder_embed_tokens", torch::nn::Embedding(options.vocab_size(), width));
  }
  encoder_positions = register_module("encoder_positions", torch::nn::Embedding(rows, width));
  decoder_positions = register_module("decoder_positions", torch::nn::Embedding(rows, width));
  if (options.layernorm_embedding()) {
    encoder_layernorm_embedding =
        register_module("encoder_layernorm_embedding", LayerNorm(LayerNormOptions({width})));
    decoder_layernorm_embedding =
        register_module("decoder_layernorm_embedding", LayerNorm(LayerNormOptions({width})));
  }
  const auto enc = batch_first(options.encoder_layer());
  const auto dec = batch_first(options.decoder_layer());
  TransformerEncoder encoder(
      TransformerEncoderOptions(TransformerEncoderLayer(enc), options.num_encoder_layers())
          .norm(final_norm(enc, options.final_norms()))
          .enable_nested_tensor(false));
  TransformerDecoder decoder(
      TransformerDecoderOptions(TransformerDecoderLayer(dec), options.num_decoder_layers())
          .norm(final_norm(dec, options.final_norms())));
  transformer = register_module("transformer",
                                Transformer(TransformerOptions(width, enc.nhead())
                                                .dropout(0.0)
                                                .batch_first(true)
                                                .custom_encoder(torch::nn::AnyModule(encoder))
                                                .custom_decoder(torch::nn::AnyModule(decoder))));
  lm_head = detail::register_lm_head(*this, width, options.vocab_size());
  final_logits_bias = register_buffer("final_logits_bias", torch::zeros({1, options.vocab_size()}));
  tie_weights();
}

void Seq2SeqLMImpl::tie_weights() {
  detail::tie_lm_head(options.tie_word_embeddings(), *lm_head, shared->weight);
}

Tensor Seq2SeqLMImpl::embed(const Tensor& ids,
                            const Tensor& position_ids,
                            const torch::nn::Embedding& tokens,
                            const torch::nn::Embedding& table,
                            const LayerNorm& norm) const {
  const int64_t width = options.encoder_layer().d_model();
  const double scale = options.scale_embedding() ? std::sqrt(static_cast<double>(width)) : 1.0;
  const int64_t offset = options.sinusoidal_positions() ? 0 : 2;
  const Tensor rows = position_ids.to(ids.device()) + offset;  // (L): the table's rows
  detail::check_positions(rows, table->weight.size(0), 0);
  Tensor x = torch::embedding(tokens->weight, ids) * scale;  // (N, L, E)
  x = x + torch::embedding(table->weight, rows);             // + (L, E)
  return norm.is_empty() ? x : apply_norm(norm, x);
}

Tensor Seq2SeqLMImpl::encode(const Tensor& input_ids, const Tensor& attention_mask) const {
  detail::check_token_ids(input_ids, options.vocab_size(), "input_ids");
  detail::check_attention_mask(attention_mask, input_ids.size(0), input_ids.size(1));
  const Tensor positions = torch::arange(input_ids.size(1), torch::kLong);  // (S)
  const Tensor x =
      embed(input_ids, positions, shared, encoder_positions, encoder_layernorm_embedding);
  return transformer->encode(x, Tensor(), detail::key_padding_mask(attention_mask));  // (N, S, E)
}

Tensor Seq2SeqLMImpl::forward(const Tensor& input_ids,
                              const Tensor& attention_mask,
                              const Tensor& decoder_input_ids) {
  const Tensor memory = encode(input_ids, attention_mask);  // (N, S, E)
  const Tensor tgt = embed_decoder(decoder_input_ids, 0);   // (N, T, E)
  const Tensor causal = generate_square_subsequent_mask(tgt.size(1), tgt.options());
  const Tensor hidden = decoder_stack(*this).forward(tgt, memory, causal, Tensor(), Tensor(),
                                                     detail::key_padding_mask(attention_mask),
                                                     /*tgt_is_causal=*/true);  // (N, T, E)
  return logits(hidden);
}

TransformerDecoderCache Seq2SeqLMImpl::make_cache(int64_t max_len) const {
  return transformer->make_decoder_cache(max_len);
}

Tensor Seq2SeqLMImpl::decode_cached(const Tensor& decoder_input_ids,
                                    const Tensor& memory,
                                    TransformerDecoderCache& cache,
                                    const Tensor& attention_mask) {
  const Tensor tgt = embed_decoder(decoder_input_ids, cache.length());  // (N, t, E)
  const Tensor hidden = transformer->decode_cached(tgt, memory, cache, Tensor(),
                                                   detail::key_padding_mask(attention_mask));
  return logits(hidden);  // (N, t, V)
}

Tensor Seq2SeqLMImpl::embed_decoder(const Tensor& decoder_input_ids, int64_t start) const {
  detail::check_token_ids(decoder_input_ids, options.vocab_size(), "decoder_input_ids");
  const Tensor positions =
      torch::arange(start, start + decoder_input_ids.size(1), torch::kLong);  // (t)
  return embed(decoder_input_ids, positions, decoder_tokens(*this), decoder_positions,
               decoder_layernorm_embedding);  // (N, t, E)
}

PagedStackCache Seq2SeqLMImpl::make_paged_cache(const PagedKVCacheOptions& options) const {
  return decoder_stack(*this).make_paged_cache(options);
}

PagedStackCache Seq2SeqLMImpl::make_paged_memory_cache(const PagedKVCacheOptions& options) const {
  return decoder_stack(*this).make_paged_memory_cache(options);
}

Tensor Seq2SeqLMImpl::forward_paged(const Tensor& decoder_input_ids,
                                    const Tensor& memory,
                                    PagedStackCache& self_cache,
                                    PagedStackCache& memory_cache,
                                    const std::vector<int64_t>& seq_ids,
                                    const Tensor& cu_seqlens,
                                    const Tensor& cu_seqlens_memory,
                                    bool last_rows_only) {
  const Tensor& ids = decoder_input_ids;
  detail::check_token_ids(ids, options.vocab_size(), "decoder_input_ids", /*dims=*/1);
  const Tensor last = last_rows_only ? detail::last_row_indices(cu_seqlens) : Tensor();  // (P)
  const Tensor positions = detail::paged_positions(self_cache, seq_ids, cu_seqlens);     // (T)
  const Tensor x = embed(ids.unsqueeze(0), positions, decoder_tokens(*this), decoder_positions,
                         decoder_layernorm_embedding)
                       .squeeze(0);  // (T, E)
  const Tensor hidden = decoder_stack(*this).forward_paged(
      x, memory, self_cache, memory_cache, seq_ids, cu_seqlens, cu_seqlens_memory);  // (T, E)
  return logits(last.defined() ? hidden.index_select(0, last.to(hidden.device())) : hidden);
}

Tensor Seq2SeqLMImpl::logits(const Tensor& hidden) const {
  // A prepacked head adds final_logits_bias in its GEMM (oneDNN's or the panels'), after the
  // accumulation: the same sum, bit for bit, without a pass over the logits.
  const auto form =
      std::dynamic_pointer_cast<const detail::PackedWeightImpl>(detail::linear_form(*lm_head));
  if (form && !python_kernels_enabled()) {
    const Tensor bias = final_logits_bias.view(-1);  // (V)
    return detail::in_row_blocks(  // fixed row blocks inside a batch-invariant step
        hidden, [&](const Tensor& rows) { return form->forward(rows, bias); });  // (..., V)
  }
  return mha::linear(*lm_head, hidden) + final_logits_bias;  // (..., V)
}

template class detail::ConvertibleModule<Seq2SeqLMImpl>;
template class detail::WholeModel<Seq2SeqLMImpl>;

void Seq2SeqLMImpl::pretty_print(std::ostream& stream) const {
  stream << "mha::Seq2SeqLM(model_type=" << options.model_type()
         << ", num_encoder_layers=" << options.num_encoder_layers()
         << ", num_decoder_layers=" << options.num_decoder_layers() << ")";
}

}  // namespace mha
