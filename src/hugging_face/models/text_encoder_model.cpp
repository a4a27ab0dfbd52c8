// mha::TextEncoderModel: BERT-style embeddings (transformers 5.23,
// models/{bert,roberta,electra,distilbert}/modeling_*.py), the layers, the pooler.

#include <c10/util/Exception.h>
#include <mha/hf_encoder_models.h>
#include <mha/quantization.h>
#include <torch/types.h>

#include "hugging_face/models/model_inputs.h"
#include "linear/converted_module.h"

namespace mha {

using torch::Tensor;

void TextEncoderModelImpl::reset() {
  const int64_t width = options.layer().d_model();
  const int64_t emb = options.embedding_size() > 0 ? options.embedding_size() : width;
  word_embeddings =
      register_module("word_embeddings", torch::nn::Embedding(options.vocab_size(), emb));
  position_embeddings = register_module(
      "position_embeddings", torch::nn::Embedding(options.max_position_embeddings(), emb));
  if (options.type_vocab_size() > 0) {
    token_type_embeddings = register_module("token_type_embeddings",
                                            torch::nn::Embedding(options.type_vocab_size(), emb));
  }
  embeddings_norm = register_module(
      "embeddings_norm", LayerNorm(LayerNormOptions({emb}).eps(options.embedding_norm_eps())));
  if (emb != width) {
    embeddings_project = register_module("embeddings_project", torch::nn::Linear(emb, width));
  }
  auto layer = options.layer();
  layer.batch_first(true);
  encoder = register_module(
      "encoder", TransformerEncoder(
                     TransformerEncoderOptions(TransformerEncoderLayer(layer), options.num_layers())
                         .enable_nested_tensor(false)));
  if (options.pooler()) {
    pooler = register_module("pooler", torch::nn::Linear(width, width));
  }
}

Tensor TextEncoderModelImpl::embed(const Tensor& input_ids, const Tensor& token_type_ids) {
  detail::check_token_ids(input_ids, options.vocab_size(), "input_ids");
  const int64_t length = input_ids.size(1);
  Tensor positions = torch::arange(length, input_ids.options().dtype(torch::kLong)).unsqueeze(0);
  if (options.model_type() == "roberta") {
    // create_position_ids_from_input_ids: tokens counted from pad + 1, padding at pad.
    const int64_t pad = options.pad_token_id();
    const Tensor not_pad = input_ids.ne(pad).to(torch::kLong);  // (N, L)
    positions = torch::cumsum(not_pad, /*dim=*/1) * not_pad + pad;
  }
  detail::check_positions(positions, options.max_position_embeddings());
  Tensor x = word_embeddings(input_ids);  // (N, L, emb)
  if (!token_type_embeddings.is_empty()) {
    const Tensor types = token_type_ids.defined() ? token_type_ids : torch::zeros_like(input_ids);
    detail::check_token_ids(types, options.type_vocab_size(), "token_type_ids");
    x = x + token_type_embeddings(types);
  } else {
    TORCH_CHECK_VALUE(!token_type_ids.defined(), options.model_type(),
                      " has no token types: expected token_type_ids undefined");
  }
  x = embeddings_norm(x + position_embeddings(positions));                         // (N, L, emb)
  return embeddings_project.is_empty() ? x : mha::linear(*embeddings_project, x);  // (N, L, E)
}

EncoderModelOutput TextEncoderModelImpl::forward(const Tensor& input_ids,
                                                 const Tensor& attention_mask,
                                                 const Tensor& token_type_ids) {
  const Tensor x = embed(input_ids, token_type_ids);  // (N, L, E)
  detail::check_attention_mask(attention_mask, input_ids.size(0), input_ids.size(1));
  // A mask with no padding is dropped, as transformers' SDPA path drops it
  // (masking_utils.py, `_ignore_bidirectional_mask_sdpa`): unmasked kernels.
  const Tensor padding =
      detail::has_padding(attention_mask) ? detail::key_padding_mask(attention_mask) : Tensor();
  return detail::encoder_model_output(encoder(x, Tensor(), padding), pooler);
}

template class detail::ConvertibleModule<TextEncoderModelImpl>;
template class detail::WholeModel<TextEncoderModelImpl>;

void TextEncoderModelImpl::pretty_print(std::ostream& stream) const {
  detail::print_model(stream, "mha::TextEncoderModel", options.model_type(), options.num_layers());
}

}  // namespace mha
