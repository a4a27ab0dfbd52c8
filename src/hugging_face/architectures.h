#pragma once

// Private: what each supported model_type's config and files mean for mha's
// Transformer classes: the layer options, the norm order, where the layers'
// tensors are and what they are called. Sources: transformers 5.23's
// models/{bert,roberta,distilbert,electra,vit,deit,bart,mbart,marian,gpt2,opt}/modeling_*.py.

#include <mha/hugging_face.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mha {
namespace detail {

/// What a model_type is: an encoder, a sequence-to-sequence model or a
/// decoder-only (causal) language model.
enum class HfKind { kEncoder, kSeq2Seq, kCausal };

/// The kind of a supported `model_type`; nullopt for another.
std::optional<HfKind> hf_kind(const std::string& model_type);

/// A layer's tensors, relative to the layer's prefix, without `.weight`/`.bias`.
struct HfLayerNames {
  /// GPT-2's fused q/k/v projection (then `q`, `k`, `v` are empty).
  std::string qkv;
  /// GPT-2's `Conv1D`: the projections' weights stored (in, out), transposed.
  bool conv1d = false;
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

/// The architecture of a model of kind `kind`; throws `c10::Error` naming an
/// unsupported model_type (or one of another kind) and the supported ones.
HfArchitecture hf_architecture(const HfCheckpoint& checkpoint, HfKind kind);

/// The supported `model_type`s of one kind.
std::vector<std::string> hf_model_types_of(HfKind kind);

/// `arch.base_prefix` when the checkpoint's keys carry it (a model with a
/// head, e.g. BertForMaskedLM's "bert.encoder..."), else "".
std::string file_prefix(const HfCheckpoint& checkpoint, const HfArchitecture& arch);

/// The checkpoint's tensors with the base model's prefix removed where the
/// keys carry it; others (a head's) kept.
std::map<std::string, torch::Tensor> without_base_prefix(const HfCheckpoint& checkpoint,
                                                         const HfArchitecture& arch);

/// The weights file a key is looked for in, for errors.
std::string source_of(const HfCheckpoint& checkpoint);

/// Marian's sinusoidal positions (positions, dim): sines in the first half of
/// the columns, cosines in the second (computed, not stored in its files).
torch::Tensor marian_sinusoids(int64_t positions, int64_t dim);

/// The rules of one GPT-2 block (Conv1D weights transposed) from the file's
/// `from` ("h.0.") into a TransformerEncoderLayer's `to` ("decoder.layers.0.").
void add_conv1d_layer_rules(CheckpointMap& map,
                            const HfStack& stack,
                            const std::string& to,
                            const std::string& from);

/// The rules of `stack`'s layers (and final norm) into a TransformerEncoder or
/// TransformerDecoder whose names start with `to_prefix` ("" or "encoder.").
void add_stack_rules(CheckpointMap& map, const HfStack& stack, const std::string& to_prefix);

}  // namespace detail
}  // namespace mha
