#pragma once

// Private: what each supported model_type's config and files mean for mha's
// Transformer classes: the layer options, the norm order, where the layers'
// tensors are and what they are called. Sources: transformers 5.23's
// models/{bert,roberta,distilbert,vit,deit,bart,mbart,marian}/modeling_*.py.

#include <mha/hugging_face.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mha {
namespace detail {

/// A layer's tensors, relative to the layer's prefix, without `.weight`/`.bias`.
struct HfLayerNames {
  std::string q, k, v, out;                          // self-attention
  std::string cross_q, cross_k, cross_v, cross_out;  // cross-attention (decoders)
  std::string fc1, fc2;                              // feed-forward
  std::string norm1, norm2, norm3;                   // mha's norm1, norm2, norm3
};

/// One stack (an encoder or a decoder) of a checkpoint.
struct HfStack {
  /// The layers' key prefix, the index appended: "encoder.layer." -> "encoder.layer.0.".
  std::string layer_prefix;
  /// Number of layers.
  int64_t num_layers = 0;
  /// The layer's tensors.
  HfLayerNames names;
  /// The layer options the config gives.
  TransformerLayerOptions options{1, 1};
  /// The stack's final norm (key prefix), or "" when it has none.
  std::string final_norm;
  /// Where the shapes come from, for errors: the width, and the width with the FFN size.
  std::string width_from;
  std::string ffn_from;
};

/// A supported model_type: its base model prefix and its stacks.
struct HfArchitecture {
  /// The prefix of the base model's keys in a model with a head ("bert.", "model." ...).
  std::string base_prefix;
  HfStack encoder;
  std::optional<HfStack> decoder;
};

/// The architecture of an encoder (`seq2seq` false) or a sequence-to-sequence
/// model; throws `c10::Error` naming an unsupported model_type and the supported ones.
HfArchitecture hf_architecture(const HfCheckpoint& checkpoint, bool seq2seq);

/// `arch.base_prefix` when the checkpoint's keys carry it (a model with a
/// head, e.g. BertForMaskedLM's "bert.encoder..."), else "".
std::string file_prefix(const HfCheckpoint& checkpoint, const HfArchitecture& arch);

/// The rules of `stack`'s layers (and final norm) into a TransformerEncoder or
/// TransformerDecoder whose names start with `to_prefix` ("" or "encoder.").
void add_stack_rules(CheckpointMap& map, const HfStack& stack, const std::string& to_prefix);

}  // namespace detail
}  // namespace mha
