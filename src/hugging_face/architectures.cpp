// The supported model_types: their config fields and key names (transformers
// 5.23, models/*/modeling_*.py and configuration_*.py), as mha's layer options
// and CheckpointMap rules.

#include "hugging_face/architectures.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/functional/activation.h>

#include <algorithm>
#include <array>

namespace mha {
namespace detail {
namespace {

/// transformers' ACT2FN names (activations.py) that mha's layers compute.
TransformerActivation activation(const HfConfig& config,
                                 const std::string& field,
                                 const std::string& fallback) {
  const std::string name = config.string(field, fallback);
  const bool tanh_gelu = name == "gelu_new" || name == "gelu_pytorch_tanh";
  TORCH_CHECK(
      name == "gelu" || name == "relu" || name == "silu" || name == "swish" || tanh_gelu,
      config.source(), ": ", field, " '", name,
      "' is not supported; supported: gelu, gelu_new, gelu_pytorch_tanh, relu, silu, swish");
  if (name == "gelu") {
    return torch::kGELU;
  }
  if (name == "relu") {
    return torch::kReLU;
  }
  if (tanh_gelu) {
    return std::function<torch::Tensor(const torch::Tensor&)>(
        [](const torch::Tensor& x) { return torch::gelu(x, "tanh"); });
  }
  return std::function<torch::Tensor(const torch::Tensor&)>(  // silu, swish
      [](const torch::Tensor& x) { return torch::silu(x); });
}

std::string describe(const HfConfig& config, const std::vector<std::string>& fields) {
  std::vector<std::string> parts;
  for (const auto& field : fields) {
    parts.push_back(fmt::format("{} {}", field, config.integer(field)));
  }
  return fmt::format("config.json: {}", fmt::join(parts, ", "));
}

/// A stack whose fields have these names.
HfStack stack(const HfConfig& config,
              std::string layer_prefix,
              const std::string& width,
              const std::string& heads,
              const std::string& ffn,
              const std::string& layers,
              TransformerActivation act,
              double eps,
              bool norm_first,
              HfLayerNames names,
              std::string final_norm = "") {
  HfStack out;
  out.layer_prefix = std::move(layer_prefix);
  out.num_layers = config.integer(layers);
  out.names = std::move(names);
  out.options = TransformerLayerOptions(config.integer(width), config.integer(heads))
                    .dim_feedforward(config.integer(ffn))
                    .dropout(0.0)
                    .activation(std::move(act))
                    .layer_norm_eps(eps)
                    .batch_first(true)
                    .norm_first(norm_first);
  out.final_norm = std::move(final_norm);
  out.width_from = describe(config, {width});
  out.ffn_from = describe(config, {width, ffn});
  return out;
}

/// A layer's names but for q, k and v.
HfLayerNames block_names(
    std::string out, std::string fc1, std::string fc2, std::string norm1, std::string norm2) {
  HfLayerNames n;
  n.out = std::move(out);
  n.fc1 = std::move(fc1);
  n.fc2 = std::move(fc2);
  n.norm1 = std::move(norm1);
  n.norm2 = std::move(norm2);
  return n;
}

/// A layer's names: q, k and v under `attention`, then the others.
HfLayerNames layer_names(const std::string& attention,
                         const std::array<const char*, 3>& qkv,
                         std::string out,
                         std::string fc1,
                         std::string fc2,
                         std::string norm1,
                         std::string norm2) {
  HfLayerNames n = block_names(std::move(out), std::move(fc1), std::move(fc2), std::move(norm1),
                               std::move(norm2));
  n.q = attention + qkv[0];
  n.k = attention + qkv[1];
  n.v = attention + qkv[2];
  return n;
}

HfLayerNames bert_names() {
  return layer_names("attention.self.", {"query", "key", "value"}, "attention.output.dense",
                     "intermediate.dense", "output.dense", "attention.output.LayerNorm",
                     "output.LayerNorm");
}

HfLayerNames vit_names() {
  return layer_names("attention.attention.", {"query", "key", "value"}, "attention.output.dense",
                     "intermediate.dense", "output.dense", "layernorm_before", "layernorm_after");
}

HfLayerNames distilbert_names() {
  return layer_names("attention.", {"q_lin", "k_lin", "v_lin"}, "attention.out_lin", "ffn.lin1",
                     "ffn.lin2", "sa_layer_norm", "output_layer_norm");
}

/// bart, mbart and marian: the decoder's norm2 follows the cross-attention.
HfLayerNames bart_names(bool decoder) {
  HfLayerNames n =
      layer_names("self_attn.", {"q_proj", "k_proj", "v_proj"}, "self_attn.out_proj", "fc1", "fc2",
                  "self_attn_layer_norm", decoder ? "encoder_attn_layer_norm" : "final_layer_norm");
  if (decoder) {
    n.cross_q = "encoder_attn.q_proj";
    n.cross_k = "encoder_attn.k_proj";
    n.cross_v = "encoder_attn.v_proj";
    n.cross_out = "encoder_attn.out_proj";
    n.norm3 = "final_layer_norm";
  }
  return n;
}

/// GPT-2's block (modeling_gpt2.py): c_attn's fused q/k/v and every
/// projection a Conv1D, pre-norm ln_1/ln_2.
HfLayerNames gpt2_names() {
  HfLayerNames n = block_names("attn.c_proj", "mlp.c_fc", "mlp.c_proj", "ln_1", "ln_2");
  n.qkv = "attn.c_attn";
  n.conv1d = true;
  return n;
}

/// The loader of each kind, for messages.
const char* loader_name(HfKind kind) {
  static constexpr const char* kLoaders[] = {"load_hf_encoder", "load_hf_seq2seq",
                                             "load_hf_model"};  // in the enum's order
  return kLoaders[static_cast<int>(kind)];
}

[[noreturn]] void unsupported(const HfCheckpoint& checkpoint, HfKind kind) {
  std::vector<std::string> others;
  for (HfKind other : {HfKind::kEncoder, HfKind::kSeq2Seq, HfKind::kCausal}) {
    if (other != kind) {
      others.push_back(
          fmt::format("{}: {}", loader_name(other), fmt::join(hf_model_types_of(other), ", ")));
    }
  }
  TORCH_CHECK(false, checkpoint.directory, ": model_type '", checkpoint.model_type,
              "' is not supported by ", loader_name(kind),
              "; supported: ", fmt::format("{}", fmt::join(hf_model_types_of(kind), ", ")), " (",
              fmt::format("{}", fmt::join(others, "; ")), ")");
}

/// GPT-2's options that change the attention's numbers: refused unless at
/// the default (configuration_gpt2.py).
void check_gpt2_attention(const HfConfig& c) {
  TORCH_CHECK(c.boolean("scale_attn_weights", true), c.source(),
              ": scale_attn_weights false (attention without the 1/sqrt(head_dim) scale) is not "
              "supported; expected true");
  for (const char* field :
       {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"}) {
    TORCH_CHECK(!c.boolean(field, false), c.source(), ": ", field,
                " true is not supported by mha's GPT-2; expected false (transformers' default)");
  }
}

/// OPT's options mha's layers do not compute: refused unless at the default
/// (configuration_opt.py).
void check_opt_options(const HfConfig& c) {
  for (const char* field : {"enable_bias", "layer_norm_elementwise_affine"}) {
    TORCH_CHECK(c.boolean(field, true), c.source(), ": ", field,
                " false is not supported by mha's OPT; expected true (transformers' default)");
  }
}

HfStack gpt2_stack(const HfConfig& c) {
  check_gpt2_attention(c);
  HfStack out =
      stack(c, "h.", "n_embd", "n_head", "n_embd", "n_layer",
            activation(c, "activation_function", "gelu_new"), c.number("layer_norm_epsilon", 1e-5),
            /*norm_first=*/true, gpt2_names(), "ln_f");
  // n_inner null: 4 * n_embd (GPT2MLP's inner_dim).
  const int64_t inner = c.integer("n_inner", 4 * c.integer("n_embd"));
  out.options.dim_feedforward(inner);
  out.ffn_from = fmt::format("config.json: n_embd {}, n_inner {}", c.integer("n_embd"), inner);
  return out;
}

HfStack opt_stack(const HfConfig& c) {
  check_opt_options(c);
  // modeling_opt.py: OPTDecoderLayer pre-norm when do_layer_norm_before (then
  // the decoder's final_layer_norm unless _remove_final_layer_norm), post-norm
  // otherwise (opt-350m); nn.LayerNorm's eps 1e-5.
  const bool pre = c.boolean("do_layer_norm_before", true);
  const bool final_norm = pre && !c.boolean("_remove_final_layer_norm", false);
  return stack(c, "decoder.layers.", "hidden_size", "num_attention_heads", "ffn_dim",
               "num_hidden_layers", activation(c, "activation_function", "relu"), 1e-5, pre,
               bart_names(false), final_norm ? "decoder.final_layer_norm" : "");
}

}  // namespace

std::optional<HfKind> hf_kind(const std::string& model_type) {
  for (HfKind kind : {HfKind::kEncoder, HfKind::kSeq2Seq, HfKind::kCausal}) {
    const auto types = hf_model_types_of(kind);
    if (std::find(types.begin(), types.end(), model_type) != types.end()) {
      return kind;
    }
  }
  return std::nullopt;
}

std::vector<std::string> hf_model_types_of(HfKind kind) {
  switch (kind) {
    case HfKind::kEncoder:
      return hf_encoder_model_types();
    case HfKind::kSeq2Seq:
      return hf_seq2seq_model_types();
    case HfKind::kCausal:
      break;
  }
  return {"gpt2", "opt"};
}

HfArchitecture hf_architecture(const HfCheckpoint& checkpoint, HfKind kind) {
  const HfConfig& c = checkpoint.config;
  const std::string& type = checkpoint.model_type;
  const bool seq2seq = kind == HfKind::kSeq2Seq;
  HfArchitecture out;
  if (hf_kind(type) != kind) {
    unsupported(checkpoint, kind);
  }
  if (type == "bert" || type == "roberta" || type == "electra") {
    // modeling_bert.py: BertLayer is post-norm; BertConfig.layer_norm_eps 1e-12.
    // modeling_electra.py: ElectraLayer is BertLayer's copy.
    out.base_prefix = type + ".";
    out.encoder = stack(c, "encoder.layer.", "hidden_size", "num_attention_heads",
                        "intermediate_size", "num_hidden_layers",
                        activation(c, "hidden_act", "gelu"), c.number("layer_norm_eps", 1e-12),
                        /*norm_first=*/false, bert_names());
  } else if (type == "distilbert") {
    // modeling_distilbert.py: TransformerBlock, post-norm, nn.LayerNorm(eps=1e-12).
    out.base_prefix = "distilbert.";
    out.encoder =
        stack(c, "transformer.layer.", "dim", "n_heads", "hidden_dim", "n_layers",
              activation(c, "activation", "gelu"), 1e-12, /*norm_first=*/false, distilbert_names());
  } else if (type == "vit" || type == "deit") {
    // modeling_vit.py: ViTLayer, pre-norm (layernorm_before/after); ViTModel.layernorm.
    out.base_prefix = type + ".";
    out.encoder = stack(c, "encoder.layer.", "hidden_size", "num_attention_heads",
                        "intermediate_size", "num_hidden_layers",
                        activation(c, "hidden_act", "gelu"), c.number("layer_norm_eps", 1e-12),
                        /*norm_first=*/true, vit_names(), "layernorm");
  } else if (seq2seq) {  // bart, marian, mbart
    // modeling_{bart,marian}.py: post-norm layers; modeling_mbart.py: pre-norm
    // layers and final encoder/decoder layer_norm. nn.LayerNorm's eps 1e-5.
    const bool pre = type == "mbart";
    const auto act = activation(c, "activation_function", "gelu");
    out.base_prefix = "model.";
    out.encoder =
        stack(c, "encoder.layers.", "d_model", "encoder_attention_heads", "encoder_ffn_dim",
              "encoder_layers", act, 1e-5, pre, bart_names(false), pre ? "encoder.layer_norm" : "");
    out.decoder =
        stack(c, "decoder.layers.", "d_model", "decoder_attention_heads", "decoder_ffn_dim",
              "decoder_layers", act, 1e-5, pre, bart_names(true), pre ? "decoder.layer_norm" : "");
  } else if (type == "gpt2") {
    out.base_prefix = "transformer.";
    out.encoder = gpt2_stack(c);
  } else {  // opt
    out.base_prefix = "model.";
    out.encoder = opt_stack(c);
  }
  return out;
}

std::string file_prefix(const HfCheckpoint& checkpoint, const HfArchitecture& arch) {
  for (const auto& item : checkpoint.tensors) {
    if (item.first.rfind(arch.base_prefix, 0) == 0) {
      return arch.base_prefix;
    }
  }
  return "";
}

namespace {

/// A Conv1D weight (in, out) as a Linear weight (out, in).
torch::Tensor transposed(const std::vector<torch::Tensor>& weight) {
  return weight.front().t().contiguous();
}

/// `to.weight` from a Conv1D's `from.weight` (in, out), transposed to
/// Linear's (out, in), and `to.bias` from `from.bias`.
void rename_conv1d(CheckpointMap& map,
                   const std::string& to,
                   const std::string& from,
                   const std::string& shape_from) {
  map.add(to + ".weight", {from + ".weight"}, transposed, shape_from);
  map.rename(to + ".bias", from + ".bias", shape_from);
}

}  // namespace

void add_conv1d_layer_rules(CheckpointMap& map,
                            const HfStack& stack,
                            const std::string& to,
                            const std::string& from) {
  const HfLayerNames& n = stack.names;
  map.add(to + "self_attn.in_proj_weight", {from + n.qkv + ".weight"}, transposed,
          stack.width_from);  // (E, 3E) -> (3E, E): q, k, v rows as in_proj_weight's
  map.rename(to + "self_attn.in_proj_bias", from + n.qkv + ".bias", stack.width_from);
  rename_conv1d(map, to + "self_attn.out_proj", from + n.out, stack.width_from);
  rename_conv1d(map, to + "linear1", from + n.fc1, stack.ffn_from);
  rename_conv1d(map, to + "linear2", from + n.fc2, stack.ffn_from);
  map.rename_weight_and_bias(to + "norm1", from + n.norm1, stack.width_from);
  map.rename_weight_and_bias(to + "norm2", from + n.norm2, stack.width_from);
}

void add_stack_rules(CheckpointMap& map, const HfStack& stack, const std::string& to_prefix) {
  const HfLayerNames& n = stack.names;
  for (int64_t i = 0; i < stack.num_layers; ++i) {
    const std::string to = fmt::format("{}layers.{}.", to_prefix, i);
    const std::string from = fmt::format("{}{}.", stack.layer_prefix, i);
    if (n.conv1d) {
      add_conv1d_layer_rules(map, stack, to, from);
      continue;
    }
    map.attention(to + "self_attn.", from + n.q, from + n.k, from + n.v, from + n.out,
                  stack.width_from);
    if (!n.cross_q.empty()) {
      map.attention(to + "multihead_attn.", from + n.cross_q, from + n.cross_k, from + n.cross_v,
                    from + n.cross_out, stack.width_from);
    }
    map.rename_weight_and_bias(to + "linear1", from + n.fc1, stack.ffn_from);
    map.rename_weight_and_bias(to + "linear2", from + n.fc2, stack.ffn_from);
    map.rename_weight_and_bias(to + "norm1", from + n.norm1, stack.width_from);
    map.rename_weight_and_bias(to + "norm2", from + n.norm2, stack.width_from);
    if (!n.norm3.empty()) {
      map.rename_weight_and_bias(to + "norm3", from + n.norm3, stack.width_from);
    }
  }
  if (!stack.final_norm.empty()) {
    map.rename_weight_and_bias(to_prefix + "norm", stack.final_norm, stack.width_from);
  }
}

}  // namespace detail

std::vector<std::string> hf_encoder_model_types() {
  return {"bert", "deit", "distilbert", "electra", "roberta", "vit"};
}

std::vector<std::string> hf_seq2seq_model_types() { return {"bart", "marian", "mbart"}; }

}  // namespace mha
