// mha::CausalLM: GPT-2 and OPT on mha's causal stack (transformers 5.23,
// models/{gpt2,opt}/modeling_*.py): token and learned position embeddings
// (OPT's from row 2), OPT's project_in/project_out, the tied LM head.

#include <c10/util/Exception.h>
#include <mha/hf_language_models.h>
#include <mha/quantization.h>
#include <torch/types.h>

#include "hugging_face/models/model_inputs.h"
#include "linear/converted_module.h"

namespace mha {

using torch::Tensor;

void CausalLMImpl::reset() {
  const int64_t width = options.layer().d_model();
  const int64_t words = options.word_embed_proj_dim() > 0 ? options.word_embed_proj_dim() : width;
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(options.vocab_size(), words));
  embed_positions = register_module(
      "embed_positions",
      torch::nn::Embedding(options.max_position_embeddings() + options.position_offset(), width));
  if (words != width) {
    project_in = register_module(
        "project_in", torch::nn::Linear(torch::nn::LinearOptions(words, width).bias(false)));
  }
  auto layer = options.layer();
  layer.batch_first(true);
  torch::nn::AnyModule norm;
  if (options.final_norm()) {
    norm = torch::nn::AnyModule(LayerNorm(LayerNormOptions({width}).eps(layer.layer_norm_eps())));
  }
  decoder = register_module(
      "decoder", TransformerEncoder(
                     TransformerEncoderOptions(TransformerEncoderLayer(layer), options.num_layers())
                         .norm(norm)
                         .enable_nested_tensor(false)));
  if (words != width) {
    project_out = register_module(
        "project_out", torch::nn::Linear(torch::nn::LinearOptions(width, words).bias(false)));
  }
  lm_head = detail::register_lm_head(*this, words, options.vocab_size());
  tie_weights();
}

void CausalLMImpl::tie_weights() {
  detail::tie_lm_head(options.tie_word_embeddings(), *lm_head, embed_tokens->weight);
}

Tensor CausalLMImpl::default_position_ids(const Tensor& attention_mask,
                                          int64_t batch,
                                          int64_t past,
                                          int64_t length) const {
  const auto opts = torch::TensorOptions().dtype(torch::kLong);
  if (options.model_type() != "opt" || !attention_mask.defined()) {
    // GPT2Model: cache_position, past..past+length-1, whatever the padding.
    return torch::arange(past, past + length, opts).unsqueeze(0).expand({batch, length});
  }
  // OPTDecoder: (cumsum(mask) * mask - 1)[:, past:], padding at -1.
  const Tensor mask = attention_mask.to(torch::kLong);  // (N, past + length)
  const Tensor counted = torch::cumsum(mask, /*dim=*/1) * mask - 1;
  return counted.narrow(1, past, length);  // (N, length)
}

Tensor CausalLMImpl::embed(const Tensor& input_ids, const Tensor& position_ids) const {
  TORCH_CHECK_VALUE(position_ids.sizes() == input_ids.sizes(), "position_ids: expected shape ",
                    input_ids.sizes(), " (as input_ids), but got ", position_ids.sizes());
  detail::check_positions(position_ids, embed_positions->weight.size(0), options.position_offset());
  Tensor x = torch::embedding(embed_tokens->weight, input_ids);  // (N, L, words)
  if (!project_in.is_empty()) {
    x = mha::linear(*project_in, x);  // (N, L, E)
  }
  const Tensor rows =
      options.position_offset() == 0 ? position_ids : position_ids + options.position_offset();
  return x + torch::embedding(embed_positions->weight, rows);  // (N, L, E)
}

Tensor CausalLMImpl::project(const Tensor& hidden) const {
  return project_out.is_empty() ? hidden : mha::linear(*project_out, hidden);
}

Tensor CausalLMImpl::logits(const Tensor& hidden) const {
  return mha::linear(*lm_head, hidden);  // (..., V)
}

Tensor CausalLMImpl::hidden_states(const Tensor& input_ids,
                                   const Tensor& attention_mask,
                                   const Tensor& position_ids) {
  detail::check_token_ids(input_ids, options.vocab_size(), "input_ids");
  const int64_t batch = input_ids.size(0);
  const int64_t length = input_ids.size(1);
  detail::check_attention_mask(attention_mask, batch, length);
  const Tensor positions = position_ids.defined()
                               ? position_ids
                               : default_position_ids(attention_mask, batch, 0, length);
  const Tensor x = embed(input_ids, positions);  // (N, L, E)
  Tensor hidden;
  if (detail::has_padding(attention_mask)) {
    const Tensor mask = detail::padded_causal_mask(attention_mask, options.layer().nhead(),
                                                   x.scalar_type());  // (N * H, L, L)
    hidden = decoder->forward(x, mask, Tensor(), /*is_causal=*/false);
  } else {
    const Tensor causal = generate_square_subsequent_mask(length, x.options());  // (L, L)
    hidden = decoder->forward(x, causal, Tensor(), /*is_causal=*/true);
  }
  return project(hidden);
}

Tensor CausalLMImpl::forward(const Tensor& input_ids,
                             const Tensor& attention_mask,
                             const Tensor& position_ids) {
  return logits(hidden_states(input_ids, attention_mask, position_ids));  // (N, L, V)
}

TransformerEncoderCache CausalLMImpl::make_cache(int64_t max_len) const {
  return decoder->make_cache(max_len);
}

Tensor CausalLMImpl::forward_cached(const Tensor& input_ids,
                                    TransformerEncoderCache& cache,
                                    const Tensor& attention_mask,
                                    const Tensor& position_ids) {
  detail::check_token_ids(input_ids, options.vocab_size(), "input_ids");
  const int64_t batch = input_ids.size(0);
  const int64_t length = input_ids.size(1);
  const int64_t past = cache.length();
  detail::check_attention_mask(attention_mask, batch, past + length);
  const Tensor positions = position_ids.defined()
                               ? position_ids
                               : default_position_ids(attention_mask, batch, past, length);
  const Tensor x = embed(input_ids, positions);  // (N, t, E)
  // No mask without padding: a decode step then takes the decode kernel.
  const Tensor padding =
      detail::has_padding(attention_mask) ? detail::key_padding_mask(attention_mask) : Tensor();
  const Tensor hidden = decoder->forward_cached(x, cache, padding);  // (N, t, E)
  return logits(project(hidden));                                    // (N, t, V)
}

PagedStackCache CausalLMImpl::make_paged_cache(const PagedKVCacheOptions& options) const {
  return decoder->make_paged_cache(options);
}

Tensor CausalLMImpl::forward_paged(const Tensor& input_ids,
                                   PagedStackCache& cache,
                                   const std::vector<int64_t>& seq_ids,
                                   const Tensor& cu_seqlens,
                                   const Tensor& position_ids,
                                   bool last_rows_only) {
  detail::check_token_ids(input_ids, options.vocab_size(), "input_ids", /*dims=*/1);
  const Tensor last = last_rows_only ? detail::last_row_indices(cu_seqlens) : Tensor();  // (P)
  const Tensor positions =  // (T): each sequence's rows continue from its cached positions
      position_ids.defined() ? position_ids : detail::paged_positions(cache, seq_ids, cu_seqlens);
  const Tensor x = embed(input_ids.unsqueeze(0), positions.unsqueeze(0)).squeeze(0);  // (T, E)
  const Tensor hidden = decoder->forward_paged(x, cache, seq_ids, cu_seqlens);        // (T, E)
  const Tensor rows = last.defined() ? hidden.index_select(0, last.to(hidden.device())) : hidden;
  return logits(project(rows));  // (P or T, V)
}

template class detail::ConvertibleModule<CausalLMImpl>;
template class detail::WholeModel<CausalLMImpl>;

void CausalLMImpl::pretty_print(std::ostream& stream) const {
  detail::print_model(stream, "mha::CausalLM", options.model_type(), options.num_layers());
}

}  // namespace mha
