// load_hf_model: a checkpoint's model_type -> the whole model's options (from
// config.json, transformers 5.23's configuration_*.py defaults) and the rules
// that build each of its tensors from the file's.

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mha/hf_models.h>
#include <mha/prepack.h>

#include <algorithm>
#include <set>

#include "hugging_face/architectures.h"
#include "hugging_face/models/task_heads.h"
#include "linear/packed_linear.h"

namespace mha {
namespace {

using Tensors = std::map<std::string, torch::Tensor>;

/// What a model kind's builder reads: the checkpoint's config and
/// model_type, its architecture and its tensors (without the base prefix).
struct ModelSource {
  const HfConfig& config;
  const std::string& type;
  const detail::HfArchitecture& arch;
  const Tensors& tensors;

  bool has(const std::string& key) const { return tensors.count(key) != 0; }
};

/// `to` is `value`, computed rather than read (marian's positions, a zero bias).
void computed(CheckpointMap& map, const std::string& to, torch::Tensor value) {
  map.add(to, {}, [value](const std::vector<torch::Tensor>&) { return value; });
}

/// The LM head's weight: the file's, or where `tied` and the file leaves it
/// out, the input embeddings' (`embeddings`).
void lm_head_rule(CheckpointMap& map,
                  const ModelSource& in,
                  bool tied,
                  const std::string& embeddings) {
  const std::string head = "lm_head.weight";
  map.rename(head, tied && !in.has(head) ? embeddings : head);
}

/// An encoder model's stack under "encoder." and its pooler, if it has one.
void encoder_rules(CheckpointMap& map, const detail::HfArchitecture& arch, bool pooler) {
  if (pooler) {
    map.rename_weight_and_bias("pooler", "pooler.dense");
  }
  detail::add_stack_rules(map, arch.encoder, "encoder.");
}

// ~~~ Text encoders: bert, roberta, distilbert, electra ~~~

TextEncoderModelOptions text_encoder_options(const ModelSource& in, CheckpointMap& map) {
  const HfConfig& c = in.config;
  const bool distilbert = in.type == "distilbert";
  auto options =
      TextEncoderModelOptions(in.type, in.arch.encoder.options, in.arch.encoder.num_layers)
          .vocab_size(c.integer("vocab_size"))
          .embedding_size(in.type == "electra" ? c.integer("embedding_size", 0) : 0)
          .max_position_embeddings(c.integer("max_position_embeddings"))
          .type_vocab_size(distilbert ? 0 : c.integer("type_vocab_size", 2))
          .pad_token_id(c.integer("pad_token_id", 0))
          // DistilBERT's Embeddings: nn.LayerNorm(dim, eps=1e-12), not in its config.
          .embedding_norm_eps(distilbert ? 1e-12 : c.number("layer_norm_eps", 1e-12))
          .pooler(in.has("pooler.dense.weight"));
  map.rename("word_embeddings.weight", "embeddings.word_embeddings.weight");
  map.rename("position_embeddings.weight", "embeddings.position_embeddings.weight");
  if (!distilbert) {
    map.rename("token_type_embeddings.weight", "embeddings.token_type_embeddings.weight");
  }
  map.rename_weight_and_bias("embeddings_norm", "embeddings.LayerNorm");
  if (options.embedding_size() > 0 &&
      options.embedding_size() != in.arch.encoder.options.d_model()) {
    map.rename_weight_and_bias("embeddings_project", "embeddings_project");
  }
  encoder_rules(map, in.arch, options.pooler());
  return options;
}

// ~~~ Vision encoders: vit, deit ~~~

/// Whether the checkpoint has a pooler; throws unless its activation is tanh.
bool has_tanh_pooler(const ModelSource& in) {
  if (!in.has("pooler.dense.weight")) {
    return false;
  }
  const std::string act = in.config.string("pooler_act", "tanh");
  TORCH_CHECK(act == "tanh", in.config.source(), ": pooler_act '", act,
              "' is not supported; supported: tanh");
  return true;
}

VisionEncoderModelOptions vision_encoder_options(const ModelSource& in, CheckpointMap& map) {
  const HfConfig& c = in.config;
  const bool pooler = has_tanh_pooler(in);
  auto options =
      VisionEncoderModelOptions(in.type, in.arch.encoder.options, in.arch.encoder.num_layers)
          .image_size(c.integer("image_size"))
          .patch_size(c.integer("patch_size"))
          .num_channels(c.integer("num_channels", 3))
          .pooler_size(pooler ? in.tensors.at("pooler.dense.weight").size(0) : 0);
  map.rename_weight_and_bias("patch_embeddings", "embeddings.patch_embeddings.projection");
  map.rename("cls_token", "embeddings.cls_token");
  if (in.type == "deit") {
    map.rename("distillation_token", "embeddings.distillation_token");
  }
  map.rename("position_embeddings", "embeddings.position_embeddings");
  encoder_rules(map, in.arch, pooler);
  return options;
}

// ~~~ Task heads on the encoders ~~~

/// `base`'s rules with `prefix` before each module name (a base model held as
/// a task model's `model`).
void add_prefixed(CheckpointMap& map, const CheckpointMap& base, const std::string& prefix) {
  for (const CheckpointMap::Rule& rule : base.rules()) {
    if (rule.build) {
      map.add(prefix + rule.to, rule.from, rule.build, rule.shape_from);
    } else {
      map.rename(prefix + rule.to, rule.from.front(), rule.shape_from);
    }
  }
}

/// A task model's base model options from `read`, whose rules go into `map`
/// under the base model's name, "model.".
template <typename Options>
Options base_model_options(const ModelSource& in,
                           CheckpointMap& map,
                           Options (*read)(const ModelSource&, CheckpointMap&)) {
  CheckpointMap base;
  Options options = read(in, base);
  add_prefixed(map, base, "model.");
  return options;
}

/// The head's layers in the file: RoBERTa's and ELECTRA's classification head
/// is `classifier.dense` and `classifier.out_proj`, DistilBERT's
/// `pre_classifier` and `classifier`, question answering's `qa_outputs`.
void text_head_rules(CheckpointMap& map, const std::string& type, HfTask task) {
  if (task == HfTask::kQuestionAnswering) {
    map.rename_weight_and_bias("classifier", "qa_outputs");
  } else if (task == HfTask::kTokenClassification || type == "bert") {
    map.rename_weight_and_bias("classifier", "classifier");
  } else if (type == "distilbert") {
    map.rename_weight_and_bias("dense", "pre_classifier");
    map.rename_weight_and_bias("classifier", "classifier");
  } else {  // roberta, electra
    map.rename_weight_and_bias("dense", "classifier.dense");
    map.rename_weight_and_bias("classifier", "classifier.out_proj");
  }
}

TextTaskModel text_task_model(const ModelSource& in,
                              const detail::HfHead& head,
                              CheckpointMap& map) {
  const TextEncoderModelOptions encoder = base_model_options(in, map, text_encoder_options);
  text_head_rules(map, in.type, head.task);
  const auto labels = detail::hf_id2label(in.config);
  return TextTaskModel(TextTaskModelOptions(encoder, head.task,
                                            head.task == HfTask::kQuestionAnswering
                                                ? in.config.integer("num_labels", 2)
                                                : static_cast<int64_t>(labels.size()))
                           .id2label(labels)
                           .problem_type(in.config.string("problem_type", "")));
}

ImageClassifier image_classifier(const ModelSource& in,
                                 const detail::HfHead& head,
                                 CheckpointMap& map) {
  const VisionEncoderModelOptions encoder = base_model_options(in, map, vision_encoder_options);
  if (head.with_teacher) {
    map.rename_weight_and_bias("classifier", "cls_classifier");
    map.rename_weight_and_bias("distillation_classifier", "distillation_classifier");
  } else {
    map.rename_weight_and_bias("classifier", "classifier");
  }
  const auto labels = detail::hf_id2label(in.config);
  return ImageClassifier(ImageClassifierOptions(encoder, static_cast<int64_t>(labels.size()))
                             .with_teacher(head.with_teacher)
                             .id2label(labels)
                             .problem_type(in.config.string("problem_type", "")));
}

// ~~~ Sequence-to-sequence LMs: bart, mbart, marian ~~~

/// Each stack's token embeddings; returns the key the encoder's come from.
/// transformers 5.23 ties `encoder.embed_tokens` and `decoder.embed_tokens`
/// to `shared` only where `tie_word_embeddings` (PreTrainedModel's
/// get_expanded_tied_weights_keys): untied, each stack reads its own key and
/// the file's `shared.weight` is not used.
std::string token_embedding_rules(CheckpointMap& map, const ModelSource& in, bool tied) {
  if (!tied) {
    map.rename("shared.weight", "encoder.embed_tokens.weight");
    map.rename("decoder_embed_tokens.weight", "decoder.embed_tokens.weight");
    return "encoder.embed_tokens.weight";
  }
  const std::string shared =
      in.has("shared.weight") ? "shared.weight" : "encoder.embed_tokens.weight";
  map.rename("shared.weight", shared);
  return shared;
}

Seq2SeqLM seq2seq_lm(const ModelSource& in, CheckpointMap& map) {
  const HfConfig& c = in.config;
  const bool marian = in.type == "marian";
  TORCH_CHECK(!marian || c.boolean("share_encoder_decoder_embeddings", true), c.source(),
              ": share_encoder_decoder_embeddings false (separate decoder embeddings) is not "
              "supported; expected true");
  const bool tied = c.boolean("tie_word_embeddings", true);
  auto options = Seq2SeqLMOptions(in.type, in.arch.encoder.options, in.arch.encoder.num_layers,
                                  in.arch.decoder->options, in.arch.decoder->num_layers)
                     .vocab_size(c.integer("vocab_size"))
                     .max_position_embeddings(c.integer("max_position_embeddings"))
                     .sinusoidal_positions(marian)
                     .scale_embedding(c.boolean("scale_embedding", false))
                     .layernorm_embedding(!marian)
                     .final_norms(in.type == "mbart")
                     .tie_word_embeddings(tied);
  const std::string shared = token_embedding_rules(map, in, tied);
  for (const std::string stack : {"encoder", "decoder"}) {
    if (marian) {
      computed(map, stack + "_positions.weight",
               detail::marian_sinusoids(options.max_position_embeddings(),
                                        in.arch.encoder.options.d_model()));
    } else {
      map.rename(stack + "_positions.weight", stack + ".embed_positions.weight");
      map.rename_weight_and_bias(stack + "_layernorm_embedding", stack + ".layernorm_embedding");
    }
  }
  lm_head_rule(map, in, tied, shared);
  if (in.has("final_logits_bias")) {
    map.rename("final_logits_bias", "final_logits_bias");
  } else {  // a model without its head (BartModel): transformers' zeros
    computed(map, "final_logits_bias", torch::zeros({1, options.vocab_size()}));
  }
  detail::add_stack_rules(map, in.arch.encoder, "transformer.encoder.");
  detail::add_stack_rules(map, *in.arch.decoder, "transformer.decoder.");
  return Seq2SeqLM(options);
}

// ~~~ Decoder-only LMs: gpt2, opt ~~~

CausalLM causal_lm(const ModelSource& in, CheckpointMap& map) {
  const HfConfig& c = in.config;
  const bool gpt2 = in.type == "gpt2";
  const bool tied = c.boolean("tie_word_embeddings", true);
  const int64_t width = in.arch.encoder.options.d_model();
  const int64_t words = gpt2 ? width : c.integer("word_embed_proj_dim", width);
  auto options =
      CausalLMOptions(in.type, in.arch.encoder.options, in.arch.encoder.num_layers)
          .vocab_size(c.integer("vocab_size"))
          .max_position_embeddings(c.integer(gpt2 ? "n_positions" : "max_position_embeddings"))
          .position_offset(gpt2 ? 0 : 2)  // OPTLearnedPositionalEmbedding's offset
          .word_embed_proj_dim(words)
          .final_norm(!in.arch.encoder.final_norm.empty())
          .tie_word_embeddings(tied);
  const std::string tokens = gpt2 ? "wte.weight" : "decoder.embed_tokens.weight";
  map.rename("embed_tokens.weight", tokens);
  map.rename("embed_positions.weight", gpt2 ? "wpe.weight" : "decoder.embed_positions.weight");
  if (words != width) {
    map.rename("project_in.weight", "decoder.project_in.weight");
    map.rename("project_out.weight", "decoder.project_out.weight");
  }
  lm_head_rule(map, in, tied, tokens);
  detail::add_stack_rules(map, in.arch.encoder, "decoder.");
  return CausalLM(options);
}

/// An encoder model, with the head `head` names where it names one.
HfModel::Module encoder_model(const ModelSource& in,
                              const std::optional<detail::HfHead>& head,
                              CheckpointMap& map) {
  const bool vision = in.type == "vit" || in.type == "deit";
  if (head && vision) return image_classifier(in, *head, map);
  if (head) return text_task_model(in, *head, map);
  if (vision) return VisionEncoderModel(vision_encoder_options(in, map));
  return TextEncoderModel(text_encoder_options(in, map));
}

/// The model (random weights) and the rules that load the checkpoint into it.
HfModel build(const ModelSource& in,
              detail::HfKind kind,
              const std::optional<detail::HfHead>& head,
              CheckpointMap& map) {
  HfModel out;
  out.model_type = in.type;
  switch (kind) {
    case detail::HfKind::kEncoder:
      out.module = encoder_model(in, head, map);
      break;
    case detail::HfKind::kSeq2Seq:
      out.module = seq2seq_lm(in, map);
      break;
    case detail::HfKind::kCausal:
      out.module = causal_lm(in, map);
      break;
  }
  return out;
}

/// Warns, as transformers warns, of the checkpoint's tensors `map` does not
/// read (a head the class loaded leaves out, e.g. BertForMaskedLM's `cls.*`);
/// the position ids buffer older files hold is not a weight.
void warn_unused(const Tensors& tensors,
                 const CheckpointMap& map,
                 const HfModel& model,
                 const std::string& directory) {
  const auto sources = map.sources();
  const std::set<std::string> used(sources.begin(), sources.end());
  std::vector<std::string> unused;
  for (const auto& entry : tensors) {
    const std::string& key = entry.first;
    const std::string ids = "position_ids";
    const bool position_ids =
        key.size() >= ids.size() && key.compare(key.size() - ids.size(), ids.size(), ids) == 0;
    if (!position_ids && used.count(key) == 0) {
      unused.push_back(key);
    }
  }
  if (!unused.empty()) {
    TORCH_WARN("Some weights of the model checkpoint at ", directory,
               " were not used when initializing ", model.class_name(), ": ",
               fmt::format("{}", fmt::join(unused, ", ")));
  }
}

/// A generating model's decode side, its decoder layers and LM head: the
/// modules a decode step runs (none for an encoder).
std::vector<torch::nn::Module*> decode_side(const HfModel& model) {
  if (const auto* lm = std::get_if<Seq2SeqLM>(&model.module)) {
    return {(*lm)->transformer->decoder.ptr().get(), (*lm)->lm_head.ptr().get()};
  }
  if (const auto* lm = std::get_if<CausalLM>(&model.module)) {
    return {(*lm)->decoder.ptr().get(), (*lm)->lm_head.ptr().get()};
  }
  return {};
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

std::string HfModel::class_name() const {
  std::string name = std::visit([](const auto& model) { return model->name(); }, module);
  const std::string impl = "Impl";
  if (name.size() > impl.size() &&
      name.compare(name.size() - impl.size(), impl.size(), impl) == 0) {
    name.resize(name.size() - impl.size());
  }
  return name;
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
  const auto head = *kind == detail::HfKind::kEncoder ? detail::hf_head(checkpoint) : std::nullopt;
  CheckpointMap map;
  HfModel out = build({checkpoint.config, checkpoint.model_type, arch, tensors}, *kind, head, map);
  load_checkpoint(out.base(), tensors, map, detail::source_of(checkpoint));
  if (*kind == detail::HfKind::kEncoder) warn_unused(tensors, map, out, checkpoint.directory);
  if (options.dtype() != torch::kFloat32) {
    out.base().to(options.dtype());
  }
  out.base().eval();
  if (options.prepack() && options.dtype() == torch::kFloat32 &&
      detail::PackedLinearOps::onednn().available()) {
    if (options.decoder_panels()) {
      for (torch::nn::Module* m : decode_side(out)) prepack(*m, PrepackOptions().panels(true));
    }
    // the rest (converted weights are left as they are)
    prepack(out.base(), PrepackOptions().panels(options.encoder_panels()));
  }
  return out;
}

HfModel load_hf_model(const std::string& directory, const HfModelLoadOptions& options) {
  return load_hf_model(read_hf_checkpoint(directory), options);
}

}  // namespace mha
