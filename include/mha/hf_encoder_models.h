#pragma once

// Whole encoder models of Hugging Face families (`mha::load_hf_model` makes
// them from a checkpoint directory): text (bert, roberta, distilbert,
// electra) from token ids, vision (vit, deit) from pixels; the embeddings,
// mha's `TransformerEncoder` and the pooler where the checkpoint has one.

#include <mha/convertible_module.h>
#include <mha/layer_norm.h>
#include <mha/transformer_coder.h>
#include <torch/arg.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

namespace mha {

/// What an encoder model returns, as transformers' `BaseModelOutputWithPooling`.
struct EncoderModelOutput {
  /// (N, L, E): the last layer's output (after the final norm where the family has one).
  torch::Tensor last_hidden_state;
  /// (N, E): tanh(dense(first token)), or undefined when the model has no pooler.
  torch::Tensor pooler_output;
};

/// Options of `mha::TextEncoderModel`: the layers and what a family's
/// embeddings need (transformers' config fields, named after BERT's).
struct TextEncoderModelOptions {
  /// `model_type` ("bert", "roberta", "distilbert", "electra"), the layers'
  /// options and their number.
  TextEncoderModelOptions(std::string model_type,
                          TransformerEncoderLayerOptions layer,
                          int64_t num_layers)
      : model_type_(std::move(model_type)), layer_(std::move(layer)), num_layers_(num_layers) {}
  /// Which family's embedding rules apply (roberta: positions from the padding).
  TORCH_ARG(std::string, model_type);
  /// One layer's options (batch first).
  TORCH_ARG(TransformerEncoderLayerOptions, layer);
  /// Number of layers.
  TORCH_ARG(int64_t, num_layers);
  /// Token vocabulary size.
  TORCH_ARG(int64_t, vocab_size) = 30522;
  /// Embedding width; 0 means the layers' width. Electra's may be smaller
  /// (then `embeddings_project` maps it to the layers' width).
  TORCH_ARG(int64_t, embedding_size) = 0;
  /// Rows of the position table.
  TORCH_ARG(int64_t, max_position_embeddings) = 512;
  /// Rows of the token-type table; 0: none (distilbert).
  TORCH_ARG(int64_t, type_vocab_size) = 2;
  /// The padding token (roberta counts positions from it).
  TORCH_ARG(int64_t, pad_token_id) = 0;
  /// The embedding LayerNorm's eps.
  TORCH_ARG(double, embedding_norm_eps) = 1e-12;
  /// Whether the model has BERT's pooler (dense + tanh on the first token).
  TORCH_ARG(bool, pooler) = false;
};

/// A text encoder (transformers' `BertModel`, `RobertaModel`,
/// `DistilBertModel`, `ElectraModel`): word, position and token-type
/// embeddings and their LayerNorm (electra: then `embeddings_project`), the
/// layers as a `TransformerEncoder` (`encoder.layers.*`), and the pooler.
class TextEncoderModelImpl : public detail::WholeModel<TextEncoderModelImpl> {
 public:
  /// Builds the submodules (random weights; `load_hf_model` loads a checkpoint's).
  explicit TextEncoderModelImpl(TextEncoderModelOptions options_) : options(std::move(options_)) {
    reset();
  }

  /// transformers' `model(input_ids, attention_mask, token_type_ids)`:
  /// `input_ids` (N, L) int64, `attention_mask` (N, L) 1 for tokens and 0 for
  /// padding (undefined, or without a 0: no padding, unmasked attention as in
  /// transformers' SDPA path), `token_type_ids` (N, L) (undefined:
  /// zeros). Positions 0..L-1, except roberta's, counted from
  /// `pad_token_id + 1` over the tokens that are not padding. Throws
  /// `c10::Error` for an id outside the vocabulary or L beyond the position table.
  EncoderModelOutput forward(const torch::Tensor& input_ids,
                             const torch::Tensor& attention_mask = {},
                             const torch::Tensor& token_type_ids = {});

  /// The embeddings' output, the layers' input (transformers' `hidden_states[0]`): (N, L, E).
  torch::Tensor embed(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids = {});

  /// Registers the submodules.
  void reset() override;
  /// Prints `mha::TextEncoderModel(model_type=bert, num_layers=12)`.
  void pretty_print(std::ostream& stream) const override;

  /// The options this module was constructed with.
  TextEncoderModelOptions options;
  /// (vocab_size, embedding_size).
  torch::nn::Embedding word_embeddings{nullptr};
  /// (max_position_embeddings, embedding_size).
  torch::nn::Embedding position_embeddings{nullptr};
  /// (type_vocab_size, embedding_size), or empty.
  torch::nn::Embedding token_type_embeddings{nullptr};
  /// The embedding LayerNorm.
  LayerNorm embeddings_norm{nullptr};
  /// Electra's embedding_size -> hidden size projection, or empty.
  torch::nn::Linear embeddings_project{nullptr};
  /// The layers.
  TransformerEncoder encoder{nullptr};
  /// The pooler's dense layer, or empty.
  torch::nn::Linear pooler{nullptr};
};

/// A `ModuleHolder` for `TextEncoderModelImpl`.
TORCH_MODULE(TextEncoderModel);

/// Options of `mha::VisionEncoderModel` (transformers' ViT config fields).
struct VisionEncoderModelOptions {
  /// `model_type` ("vit", "deit"), the layers' options (pre-norm) and their number.
  VisionEncoderModelOptions(std::string model_type,
                            TransformerEncoderLayerOptions layer,
                            int64_t num_layers);
  /// Which family: deit adds a distillation token.
  TORCH_ARG(std::string, model_type);
  /// One layer's options (batch first, pre-norm).
  TORCH_ARG(TransformerEncoderLayerOptions, layer);
  /// Number of layers.
  TORCH_ARG(int64_t, num_layers);
  /// Input image height and width.
  TORCH_ARG(int64_t, image_size) = 224;
  /// Patch height and width.
  TORCH_ARG(int64_t, patch_size) = 16;
  /// Image channels.
  TORCH_ARG(int64_t, num_channels) = 3;
  /// The pooler's output width (dense + tanh on the first token); 0: no pooler.
  TORCH_ARG(int64_t, pooler_size) = 0;
};

/// A vision encoder (transformers' `ViTModel`, `DeiTModel`): the patch
/// `Conv2d`, the CLS token (and deit's distillation token), position
/// embeddings, the pre-norm layers with the final `layernorm` as the
/// encoder's norm, and the pooler.
class VisionEncoderModelImpl : public detail::WholeModel<VisionEncoderModelImpl> {
 public:
  /// Builds the submodules (random weights; `load_hf_model` loads a checkpoint's).
  explicit VisionEncoderModelImpl(VisionEncoderModelOptions options_)
      : options(std::move(options_)) {
    reset();
  }

  /// transformers' `model(pixel_values)`: (N, C, H, W) at the configured
  /// size (no interpolation of positions).
  EncoderModelOutput forward(const torch::Tensor& pixel_values);

  /// The embeddings' output (transformers' `hidden_states[0]`): (N, T, E),
  /// T = patches + 1 (+ 1 for deit).
  torch::Tensor embed(const torch::Tensor& pixel_values);

  /// Registers the submodules and parameters.
  void reset() override;
  /// Prints `mha::VisionEncoderModel(model_type=vit, num_layers=12)`.
  void pretty_print(std::ostream& stream) const override;

  /// The options this module was constructed with.
  VisionEncoderModelOptions options;
  /// Patches to vectors: Conv2d(num_channels, E, patch_size, stride patch_size).
  torch::nn::Conv2d patch_embeddings{nullptr};
  /// (1, 1, E).
  torch::Tensor cls_token;
  /// (1, 1, E) for deit, else undefined.
  torch::Tensor distillation_token;
  /// (1, T, E).
  torch::Tensor position_embeddings;
  /// The layers and the final norm.
  TransformerEncoder encoder{nullptr};
  /// The pooler's dense layer, or empty.
  torch::nn::Linear pooler{nullptr};
};

/// A `ModuleHolder` for `VisionEncoderModelImpl`.
TORCH_MODULE(VisionEncoderModel);

}  // namespace mha
