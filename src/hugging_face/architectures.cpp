// The supported model_types: their config fields and key names (transformers
// 5.23, models/*/modeling_*.py and configuration_*.py), as mha's layer options
// and CheckpointMap rules.

#include "hugging_face/architectures.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/functional/activation.h>

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

/// A layer's names: q, k and v under `attention`, then the others.
HfLayerNames layer_names(const std::string& attention,
                         const std::array<const char*, 3>& qkv,
                         std::string out,
                         std::string fc1,
                         std::string fc2,
                         std::string norm1,
                         std::string norm2) {
  HfLayerNames n;
  n.q = attention + qkv[0];
  n.k = attention + qkv[1];
  n.v = attention + qkv[2];
  n.out = std::move(out);
  n.fc1 = std::move(fc1);
  n.fc2 = std::move(fc2);
  n.norm1 = std::move(norm1);
  n.norm2 = std::move(norm2);
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

[[noreturn]] void unsupported(const HfCheckpoint& checkpoint, bool seq2seq) {
  const auto ours = seq2seq ? hf_seq2seq_model_types() : hf_encoder_model_types();
  const auto other = seq2seq ? hf_encoder_model_types() : hf_seq2seq_model_types();
  TORCH_CHECK(false, checkpoint.directory, ": model_type '", checkpoint.model_type,
              "' is not supported by ", seq2seq ? "load_hf_seq2seq" : "load_hf_encoder",
              "; supported: ", fmt::format("{}", fmt::join(ours, ", ")), " (",
              seq2seq ? "load_hf_encoder" : "load_hf_seq2seq", ": ",
              fmt::format("{}", fmt::join(other, ", ")), ")");
}

}  // namespace

HfArchitecture hf_architecture(const HfCheckpoint& checkpoint, bool seq2seq) {
  const HfConfig& c = checkpoint.config;
  const std::string& type = checkpoint.model_type;
  HfArchitecture out;
  if (!seq2seq && (type == "bert" || type == "roberta")) {
    // modeling_bert.py: BertLayer is post-norm; BertConfig.layer_norm_eps 1e-12.
    out.base_prefix = type + ".";
    out.encoder = stack(c, "encoder.layer.", "hidden_size", "num_attention_heads",
                        "intermediate_size", "num_hidden_layers",
                        activation(c, "hidden_act", "gelu"), c.number("layer_norm_eps", 1e-12),
                        /*norm_first=*/false, bert_names());
  } else if (!seq2seq && type == "distilbert") {
    // modeling_distilbert.py: TransformerBlock, post-norm, nn.LayerNorm(eps=1e-12).
    out.base_prefix = "distilbert.";
    out.encoder =
        stack(c, "transformer.layer.", "dim", "n_heads", "hidden_dim", "n_layers",
              activation(c, "activation", "gelu"), 1e-12, /*norm_first=*/false, distilbert_names());
  } else if (!seq2seq && (type == "vit" || type == "deit")) {
    // modeling_vit.py: ViTLayer, pre-norm (layernorm_before/after); ViTModel.layernorm.
    out.base_prefix = type + ".";
    out.encoder = stack(c, "encoder.layer.", "hidden_size", "num_attention_heads",
                        "intermediate_size", "num_hidden_layers",
                        activation(c, "hidden_act", "gelu"), c.number("layer_norm_eps", 1e-12),
                        /*norm_first=*/true, vit_names(), "layernorm");
  } else if (seq2seq && (type == "bart" || type == "marian" || type == "mbart")) {
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
  } else {
    unsupported(checkpoint, seq2seq);
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

void add_stack_rules(CheckpointMap& map, const HfStack& stack, const std::string& to_prefix) {
  const HfLayerNames& n = stack.names;
  for (int64_t i = 0; i < stack.num_layers; ++i) {
    const std::string to = fmt::format("{}layers.{}.", to_prefix, i);
    const std::string from = fmt::format("{}{}.", stack.layer_prefix, i);
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
  return {"bert", "deit", "distilbert", "roberta", "vit"};
}

std::vector<std::string> hf_seq2seq_model_types() { return {"bart", "marian", "mbart"}; }

}  // namespace mha
