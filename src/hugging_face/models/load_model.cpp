// load_hf_model: a checkpoint's model_type -> the whole model's options (from
// config.json, transformers 5.23's configuration_*.py defaults) and the rules
// that build each of its tensors from the file's.

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mha/hf_models.h>
#include <mha/prepack.h>

#include <algorithm>

#include "hugging_face/architectures.h"
#include "linear/packed_linear.h"

namespace mha {
namespace {

using Tensors = std::map<std::string, torch::Tensor>;

bool has(const Tensors& tensors, const std::string& key) { return tensors.count(key) != 0; }

/// `to` from `from` when the file has it, else from `fallback` (a tied
/// weight that transformers leaves out of the file).
void rename_or_tied(CheckpointMap& map,
                    const Tensors& tensors,
                    const std::string& to,
                    const std::string& from,
                    const std::string& fallback) {
  map.rename(to, has(tensors, from) ? from : fallback);
}

/// `to` is `value`, computed rather than read (marian's positions, a zero bias).
void computed(CheckpointMap& map, const std::string& to, torch::Tensor value) {
  map.add(to, {}, [value](const std::vector<torch::Tensor>&) { return value; });
}

// ~~~ Text encoders: bert, roberta, distilbert, electra ~~~

TextEncoderModel text_encoder(const HfCheckpoint& checkpoint,
                              const detail::HfArchitecture& arch,
                              const Tensors& tensors,
                              CheckpointMap& map) {
  const HfConfig& c = checkpoint.config;
  const std::string& type = checkpoint.model_type;
  const bool distilbert = type == "distilbert";
  auto options = TextEncoderModelOptions(type, arch.encoder.options, arch.encoder.num_layers)
                     .vocab_size(c.integer("vocab_size"))
                     .embedding_size(type == "electra" ? c.integer("embedding_size", 0) : 0)
                     .max_position_embeddings(c.integer("max_position_embeddings"))
                     .type_vocab_size(distilbert ? 0 : c.integer("type_vocab_size", 2))
                     .pad_token_id(c.integer("pad_token_id", 0))
                     // DistilBERT's Embeddings: nn.LayerNorm(dim, eps=1e-12), not in its config.
                     .embedding_norm_eps(distilbert ? 1e-12 : c.number("layer_norm_eps", 1e-12))
                     .pooler(has(tensors, "pooler.dense.weight"));
  map.rename("word_embeddings.weight", "embeddings.word_embeddings.weight");
  map.rename("position_embeddings.weight", "embeddings.position_embeddings.weight");
  if (!distilbert) {
    map.rename("token_type_embeddings.weight", "embeddings.token_type_embeddings.weight");
  }
  map.rename_weight_and_bias("embeddings_norm", "embeddings.LayerNorm");
  if (options.embedding_size() > 0 && options.embedding_size() != arch.encoder.options.d_model()) {
    map.rename_weight_and_bias("embeddings_project", "embeddings_project");
  }
  if (options.pooler()) {
    map.rename_weight_and_bias("pooler", "pooler.dense");
  }
  detail::add_stack_rules(map, arch.encoder, "encoder.");
  return TextEncoderModel(options);
}

// ~~~ Vision encoders: vit, deit ~~~

VisionEncoderModel vision_encoder(const HfCheckpoint& checkpoint,
                                  const detail::HfArchitecture& arch,
                                  const Tensors& tensors,
                                  CheckpointMap& map) {
  const HfConfig& c = checkpoint.config;
  const bool pooler = has(tensors, "pooler.dense.weight");
  if (pooler) {
    const std::string act = c.string("pooler_act", "tanh");
    TORCH_CHECK(act == "tanh", c.source(), ": pooler_act '", act,
                "' is not supported; supported: tanh");
  }
  auto options = VisionEncoderModelOptions(checkpoint.model_type, arch.encoder.options,
                                           arch.encoder.num_layers)
                     .image_size(c.integer("image_size"))
                     .patch_size(c.integer("patch_size"))
                     .num_channels(c.integer("num_channels", 3))
                     .pooler_size(pooler ? tensors.at("pooler.dense.weight").size(0) : 0);
  map.rename_weight_and_bias("patch_embeddings", "embeddings.patch_embeddings.projection");
  map.rename("cls_token", "embeddings.cls_token");
  if (checkpoint.model_type == "deit") {
    map.rename("distillation_token", "embeddings.distillation_token");
  }
  map.rename("position_embeddings", "embeddings.position_embeddings");
  if (pooler) {
    map.rename_weight_and_bias("pooler", "pooler.dense");
  }
  detail::add_stack_rules(map, arch.encoder, "encoder.");
  return VisionEncoderModel(options);
}

// ~~~ Sequence-to-sequence LMs: bart, mbart, marian ~~~

Seq2SeqLM seq2seq_lm(const HfCheckpoint& checkpoint,
                     const detail::HfArchitecture& arch,
                     const Tensors& tensors,
                     CheckpointMap& map) {
  const HfConfig& c = checkpoint.config;
  const std::string& type = checkpoint.model_type;
  const bool marian = type == "marian";
  TORCH_CHECK(!marian || c.boolean("share_encoder_decoder_embeddings", true), c.source(),
              ": share_encoder_decoder_embeddings false (separate decoder embeddings) is not "
              "supported; expected true");
  const bool tied = c.boolean("tie_word_embeddings", true);
  auto options = Seq2SeqLMOptions(type, arch.encoder.options, arch.encoder.num_layers,
                                  arch.decoder->options, arch.decoder->num_layers)
                     .vocab_size(c.integer("vocab_size"))
                     .max_position_embeddings(c.integer("max_position_embeddings"))
                     .sinusoidal_positions(marian)
                     .scale_embedding(c.boolean("scale_embedding", false))
                     .layernorm_embedding(!marian)
                     .final_norms(type == "mbart")
                     .tie_word_embeddings(tied);
  const std::string shared =
      has(tensors, "shared.weight") ? "shared.weight" : "encoder.embed_tokens.weight";
  map.rename("shared.weight", shared);
  for (const std::string stack : {"encoder", "decoder"}) {
    if (marian) {
      computed(map, stack + "_positions.weight",
               detail::marian_sinusoids(options.max_position_embeddings(),
                                        arch.encoder.options.d_model()));
    } else {
      map.rename(stack + "_positions.weight", stack + ".embed_positions.weight");
      map.rename_weight_and_bias(stack + "_layernorm_embedding", stack + ".layernorm_embedding");
    }
  }
  if (tied) {
    rename_or_tied(map, tensors, "lm_head.weight", "lm_head.weight", shared);
  } else {
    map.rename("lm_head.weight", "lm_head.weight");
  }
  if (has(tensors, "final_logits_bias")) {
    map.rename("final_logits_bias", "final_logits_bias");
  } else {  // a model without its head (BartModel): transformers' zeros
    computed(map, "final_logits_bias", torch::zeros({1, options.vocab_size()}));
  }
  detail::add_stack_rules(map, arch.encoder, "transformer.encoder.");
  detail::add_stack_rules(map, *arch.decoder, "transformer.decoder.");
  return Seq2SeqLM(options);
}

// ~~~ Decoder-only LMs: gpt2, opt ~~~

CausalLM causal_lm(const HfCheckpoint& checkpoint,
                   const detail::HfArchitecture& arch,
                   const Tensors& tensors,
                   CheckpointMap& map) {
  const HfConfig& c = checkpoint.config;
  const bool gpt2 = checkpoint.model_type == "gpt2";
  const bool tied = c.boolean("tie_word_embeddings", true);
  const int64_t width = arch.encoder.options.d_model();
  const int64_t words = gpt2 ? width : c.integer("word_embed_proj_dim", width);
  auto options =
      CausalLMOptions(checkpoint.model_type, arch.encoder.options, arch.encoder.num_layers)
          .vocab_size(c.integer("vocab_size"))
          .max_position_embeddings(c.integer(gpt2 ? "n_positions" : "max_position_embeddings"))
          .position_offset(gpt2 ? 0 : 2)  // OPTLearnedPositionalEmbedding's offset
          .word_embed_proj_dim(words)
          .final_norm(!arch.encoder.final_norm.empty())
          .tie_word_embeddings(tied);
  const std::string tokens = gpt2 ? "wte.weight" : "decoder.embed_tokens.weight";
  map.rename("embed_tokens.weight", tokens);
  map.rename("embed_positions.weight", gpt2 ? "wpe.weight" : "decoder.embed_positions.weight");
  if (words != width) {
    map.rename("project_in.weight", "decoder.project_in.weight");
    map.rename("project_out.weight", "decoder.project_out.weight");
  }
  if (tied) {
    rename_or_tied(map, tensors, "lm_head.weight", "lm_head.weight", tokens);
  } else {
    map.rename("lm_head.weight", "lm_head.weight");
  }
  detail::add_stack_rules(map, arch.encoder, "decoder.");
  return CausalLM(options);
}

/// The model (random weights) and the rules that load the checkpoint into it.
HfModel build(const HfCheckpoint& checkpoint,
              detail::HfKind kind,
              const detail::HfArchitecture& arch,
              const Tensors& tensors,
              CheckpointMap& map) {
  HfModel out;
  out.model_type = checkpoint.model_type;
  switch (kind) {
    case detail::HfKind::kEncoder:
      if (checkpoint.model_type == "vit" || checkpoint.model_type == "deit") {
        out.module = vision_encoder(checkpoint, arch, tensors, map);
      } else {
        out.module = text_encoder(checkpoint, arch, tensors, map);
      }
      break;
    case detail::HfKind::kSeq2Seq:
      out.module = seq2seq_lm(checkpoint, arch, tensors, map);
      break;
    case detail::HfKind::kCausal:
      out.module = causal_lm(checkpoint, arch, tensors, map);
      break;
  }
  return out;
}

}  // namespace

std::vector<std::string> hf_model_types() {
  std::vector<std::string> out;
  for (auto kind : {detail::HfKind::kEncoder, detail::HfKind::kSeq2Seq, detail::HfKind::kCausal}) {
    const auto types = detail::hf_model_types_of(kind);
    out.insert(out.end(), types.begin(), types.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string hf_model_class(const std::string& model_type) {
  const auto kind = detail::hf_kind(model_type);
  if (!kind) {
    return "";
  }
  switch (*kind) {
    case detail::HfKind::kEncoder:
      return model_type == "vit" || model_type == "deit" ? "VisionEncoderModel"
                                                         : "TextEncoderModel";
    case detail::HfKind::kSeq2Seq:
      return "Seq2SeqLM";
    case detail::HfKind::kCausal:
      break;
  }
  return "CausalLM";
}

torch::nn::Module& HfModel::base() const {
  return std::visit([](const auto& model) -> torch::nn::Module& { return *model.ptr(); }, module);
}

HfModel load_hf_model(const HfCheckpoint& checkpoint, const HfModelLoadOptions& options) {
  const auto kind = detail::hf_kind(checkpoint.model_type);
  TORCH_CHECK(kind.has_value(), checkpoint.directory, ": model_type '", checkpoint.model_type,
              "' is not supported by load_hf_model; supported: ",
              fmt::format("{}", fmt::join(hf_model_types(), ", ")));
  const detail::HfArchitecture arch = detail::hf_architecture(checkpoint, *kind);
  const Tensors tensors = detail::without_base_prefix(checkpoint, arch);
  CheckpointMap map;
  HfModel out = build(checkpoint, *kind, arch, tensors, map);
  load_checkpoint(out.base(), tensors, map, detail::source_of(checkpoint));
  if (options.dtype() != torch::kFloat32) {
    out.base().to(options.dtype());
  }
  out.base().eval();
  if (options.prepack() && options.dtype() == torch::kFloat32 &&
      detail::PackedLinearOps::onednn().available()) {
    prepack(out.base());
  }
  return out;
}

HfModel load_hf_model(const std::string& directory, const HfModelLoadOptions& options) {
  return load_hf_model(read_hf_checkpoint(directory), options);
}

}  // namespace mha
