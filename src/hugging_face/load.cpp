// load_hf_encoder and load_hf_seq2seq: a checkpoint's options, layers and the
// tensors the stacks do not hold.

#include <c10/util/Exception.h>
#include <mha/hugging_face.h>
#include <mha/layer_norm.h>
#include <torch/nn/modules/container/any.h>

#include <cmath>
#include <set>

#include "hugging_face/architectures.h"

namespace mha {
namespace detail {

std::map<std::string, torch::Tensor> without_base_prefix(const HfCheckpoint& checkpoint,
                                                         const HfArchitecture& arch) {
  const std::string prefix = detail::file_prefix(checkpoint, arch);
  std::map<std::string, torch::Tensor> out;
  for (const auto& [key, tensor] : checkpoint.tensors) {
    const bool strip = !prefix.empty() && key.rfind(prefix, 0) == 0;
    out.emplace(strip ? key.substr(prefix.size()) : key, tensor);
  }
  return out;
}

std::string source_of(const HfCheckpoint& checkpoint) {
  const std::string file = checkpoint.weight_files.size() == 1 ? checkpoint.weight_files.front()
                                                               : "model.safetensors.index.json";
  return checkpoint.directory + "/" + file;
}

// modeling_marian.py's MarianSinusoidalPositionalEmbedding.create_weight.
torch::Tensor marian_sinusoids(int64_t positions, int64_t dim) {
  auto out = torch::empty({positions, dim}, torch::kFloat32);
  auto a = out.accessor<float, 2>();
  const int64_t sentinel = dim % 2 == 0 ? dim / 2 : dim / 2 + 1;
  for (int64_t pos = 0; pos < positions; ++pos) {
    for (int64_t j = 0; j < dim; ++j) {
      const double angle =
          static_cast<double>(pos) / std::pow(10000.0, 2.0 * static_cast<double>(j / 2) / dim);
      if (j % 2 == 0) {
        a[pos][j / 2] = static_cast<float>(std::sin(angle));
      } else {
        a[pos][sentinel + j / 2] = static_cast<float>(std::cos(angle));
      }
    }
  }
  return out;
}

}  // namespace detail

namespace {

/// The tensors no rule of `map` reads, as float32.
std::map<std::string, torch::Tensor> rest(const std::map<std::string, torch::Tensor>& tensors,
                                          const CheckpointMap& map) {
  const auto used = map.sources();
  const std::set<std::string> taken(used.begin(), used.end());
  std::map<std::string, torch::Tensor> out;
  for (const auto& [key, tensor] : tensors) {
    if (taken.count(key) == 0) {
      out.emplace(key, tensor.is_floating_point() ? tensor.to(torch::kFloat32) : tensor);
    }
  }
  return out;
}

/// A stack's final norm as a `LayerNorm` AnyModule, or an empty one.
torch::nn::AnyModule final_norm(const detail::HfStack& stack) {
  if (stack.final_norm.empty()) {
    return {};
  }
  return torch::nn::AnyModule(
      LayerNorm(LayerNormOptions({stack.options.d_model()}).eps(stack.options.layer_norm_eps())));
}

TransformerEncoder make_encoder(const detail::HfStack& stack) {
  return TransformerEncoder(
      TransformerEncoderOptions(TransformerEncoderLayer(stack.options), stack.num_layers)
          .norm(final_norm(stack))
          .enable_nested_tensor(false));
}

TransformerDecoder make_decoder(const detail::HfStack& stack) {
  return TransformerDecoder(
      TransformerDecoderOptions(TransformerDecoderLayer(stack.options), stack.num_layers)
          .norm(final_norm(stack)));
}

/// Tied and computed tensors a seq2seq file leaves out: where
/// `tie_word_embeddings` (its default), transformers 5.23 ties embed_tokens
/// and lm_head to shared, whatever the file holds under their names (untied,
/// each is the file's own); marian computes its positions.
void add_seq2seq_defaults(const HfCheckpoint& checkpoint,
                          std::map<std::string, torch::Tensor>& tensors) {
  auto shared = tensors.find("shared.weight");
  if (shared != tensors.end() && checkpoint.config.boolean("tie_word_embeddings", true)) {
    for (const char* tied : {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"}) {
      tensors[tied] = shared->second;
    }
    if (tensors.count("final_logits_bias") != 0) tensors["lm_head.weight"] = shared->second;
  }
  if (checkpoint.model_type == "marian") {
    const auto table = detail::marian_sinusoids(
        checkpoint.config.integer("max_position_embeddings"), checkpoint.config.integer("d_model"));
    tensors.emplace("encoder.embed_positions.weight", table);
    tensors.emplace("decoder.embed_positions.weight", table);
  }
}

}  // namespace

HfEncoder load_hf_encoder(const HfCheckpoint& checkpoint) {
  const detail::HfArchitecture arch = detail::hf_architecture(checkpoint, detail::HfKind::kEncoder);
  const auto tensors = detail::without_base_prefix(checkpoint, arch);
  CheckpointMap map;
  detail::add_stack_rules(map, arch.encoder, "");
  HfEncoder out;
  out.model_type = checkpoint.model_type;
  out.layer_options = arch.encoder.options;
  out.encoder = make_encoder(arch.encoder);
  load_checkpoint(*out.encoder, tensors, map, detail::source_of(checkpoint));
  out.encoder->eval();
  out.tensors = rest(tensors, map);
  return out;
}

HfSeq2Seq load_hf_seq2seq(const HfCheckpoint& checkpoint) {
  const detail::HfArchitecture arch = detail::hf_architecture(checkpoint, detail::HfKind::kSeq2Seq);
  const auto tensors = detail::without_base_prefix(checkpoint, arch);
  CheckpointMap map;
  detail::add_stack_rules(map, arch.encoder, "encoder.");
  detail::add_stack_rules(map, *arch.decoder, "decoder.");
  const auto& e = arch.encoder.options;
  HfSeq2Seq out;
  out.model_type = checkpoint.model_type;
  out.model = Transformer(TransformerOptions(e.d_model(), e.nhead())
                              .dropout(0.0)
                              .batch_first(true)
                              .custom_encoder(torch::nn::AnyModule(make_encoder(arch.encoder)))
                              .custom_decoder(torch::nn::AnyModule(make_decoder(*arch.decoder))));
  load_checkpoint(*out.model, tensors, map, detail::source_of(checkpoint));
  out.model->eval();
  out.encoder = TransformerEncoder(out.model->encoder.ptr<TransformerEncoderImpl>());
  out.decoder = TransformerDecoder(out.model->decoder.ptr<TransformerDecoderImpl>());
  out.tensors = rest(tensors, map);
  add_seq2seq_defaults(checkpoint, out.tensors);
  return out;
}

}  // namespace mha
