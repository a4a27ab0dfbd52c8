#pragma once

// Hugging Face checkpoints read as they are published: a model directory's
// config.json and weights (model.safetensors, shards with
// model.safetensors.index.json, or pytorch_model.bin) into mha's Transformer
// classes, with the options taken from the config and the tensors mapped
// (separate q/k/v into in_proj_weight) by a `CheckpointMap`.

#include <mha/rotary_embedding.h>
#include <mha/transformer.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mha {

/// The top-level fields of a Hugging Face `config.json` (or
/// `generation_config.json`). Getters throw `c10::Error` naming the file and
/// the field when it is missing or of another type.
class HfConfig {
 public:
  /// Parses JSON text (an object); `source` names it in errors.
  static HfConfig parse(const std::string& json_text, const std::string& source);
  /// Reads and parses the file at `path`.
  static HfConfig read(const std::string& path);

  /// The file (or text) the fields came from.
  const std::string& source() const { return source_; }
  /// True when the field is present and not `null`.
  bool has(const std::string& field) const;
  /// An integer field.
  int64_t integer(const std::string& field) const;
  /// An integer field, or `fallback` when absent or `null`.
  int64_t integer(const std::string& field, int64_t fallback) const;
  /// A number field (integers too).
  double number(const std::string& field) const;
  /// A number field, or `fallback` when absent or `null`.
  double number(const std::string& field, double fallback) const;
  /// A string field.
  std::string string(const std::string& field) const;
  /// A string field, or `fallback` when absent or `null`.
  std::string string(const std::string& field, const std::string& fallback) const;
  /// A boolean field, or `fallback` when absent or `null`.
  bool boolean(const std::string& field, bool fallback) const;
  /// An integer or a list of integers (as `eos_token_id` may be); empty when
  /// absent or `null`.
  std::vector<int64_t> integers(const std::string& field) const;
  /// A string or a list of strings (as `stop_strings` may be); empty when
  /// absent or `null`.
  std::vector<std::string> strings(const std::string& field) const;
  /// The field's JSON text, as the file has it (`null` when absent).
  std::string json_text(const std::string& field) const;
  /// A list of lists of integers (as `bad_words_ids`); empty when absent or `null`.
  std::vector<std::vector<int64_t>> integer_lists(const std::string& field) const;

 private:
  std::string source_;
  std::map<std::string, std::string> fields_;  // each field's JSON text
};

/// A Hugging Face model directory: its config and every tensor of its weights
/// file(s), as stored (float32, float16 or bfloat16 ...), on the CPU.
struct HfCheckpoint {
  /// The directory read.
  std::string directory;
  /// `config.json`.
  HfConfig config;
  /// `generation_config.json`, when the directory has one.
  std::optional<HfConfig> generation_config;
  /// The config's `model_type`, as written.
  std::string model_type;
  /// Every tensor by its name in the files.
  std::map<std::string, torch::Tensor> tensors;
  /// The file (name within `directory`) each tensor came from.
  std::map<std::string, std::string> files;
  /// The weights files read, in order.
  std::vector<std::string> weight_files;
};

/// True when `directory` holds a `config.json` with a `model_type` and a
/// weights file transformers reads (`model.safetensors`,
/// `model.safetensors.index.json` or `pytorch_model.bin`).
bool is_hf_checkpoint(const std::string& directory);

/// A Llama-shaped config's rotary embedding parameters as transformers 5.23
/// standardizes them (modeling_rope_utils.py, `convert_rope_params_to_dict`
/// and `standardize_rope_params`): `rope_parameters`, else the older
/// `rope_scaling` (its `type` as `rope_type`), with the top-level `rope_theta`
/// (else `default_theta`) and `partial_rotary_factor` where the dict has none,
/// and for llama3, yarn and longrope the top-level
/// `original_max_position_embeddings` (Phi-3's), else `max_position_embeddings`.
RopeParameters read_rope_parameters(const HfConfig& config, double default_theta = 10000.0);

/// Reads a Hugging Face model directory with mha's weights readers
/// (`read_state_dict`, nothing pickled is run): `model.safetensors`, else the
/// shards `model.safetensors.index.json` lists, else `pytorch_model.bin`.
/// Other files (tokenizer files, ...) are ignored. Throws `c10::Error` naming
/// the directory and the file when one is missing or unreadable.
HfCheckpoint read_hf_checkpoint(const std::string& directory);

/// How a module's tensors are built from a checkpoint's: one rule per module
/// tensor, from one checkpoint tensor (`rename`) or several (`concat`, `add`).
/// `KeyMap` renames keys; a `CheckpointMap` also builds a tensor from several.
///
/// Example (one BERT attention block into `mha::MultiheadAttention`):
/// ```
/// mha::CheckpointMap map;
/// map.attention("self_attn.", "encoder.layer.0.attention.self.query",
///               "encoder.layer.0.attention.self.key", "encoder.layer.0.attention.self.value",
///               "encoder.layer.0.attention.output.dense");
/// ```
class CheckpointMap {
 public:
  /// Builds a tensor from the checkpoint's tensors named by `from`, in order.
  using Build = std::function<torch::Tensor(const std::vector<torch::Tensor>& sources)>;

  /// One rule: the module tensor `to`, built from the checkpoint's `from`.
  struct Rule {
    /// The module's parameter or buffer name.
    std::string to;
    /// The checkpoint keys it is built from.
    std::vector<std::string> from;
    /// How (undefined: `from` has one key, taken as it is).
    Build build;
    /// Where the module's expected shape comes from, for errors (e.g.
    /// "config.json: hidden_size 768, intermediate_size 3072").
    std::string shape_from;
  };

  /// `to` is the checkpoint's `from`.
  CheckpointMap& rename(std::string to, std::string from, std::string shape_from = "");
  /// `to` is the checkpoint's `from` tensors concatenated along dim 0 (e.g.
  /// q, k and v weights into `in_proj_weight`).
  CheckpointMap& concat(std::string to, std::vector<std::string> from, std::string shape_from = "");
  /// `to` is `build` of the checkpoint's `from` tensors.
  CheckpointMap& add(std::string to,
                     std::vector<std::string> from,
                     Build build,
                     std::string shape_from = "");
  /// The rules of one `mha::MultiheadAttention` under `to_prefix` (e.g.
  /// "layers.0.self_attn."): `in_proj_weight`/`in_proj_bias` from the q, k, v
  /// projections' `.weight`/`.bias`, `out_proj.*` from `out`'s.
  CheckpointMap& attention(const std::string& to_prefix,
                           const std::string& q,
                           const std::string& k,
                           const std::string& v,
                           const std::string& out,
                           const std::string& shape_from = "");
  /// `to.weight` and `to.bias` from `from.weight` and `from.bias` (a Linear or a LayerNorm).
  CheckpointMap& rename_weight_and_bias(const std::string& to,
                                        const std::string& from,
                                        const std::string& shape_from = "");

  /// The rules, in the order they were added.
  const std::vector<Rule>& rules() const { return rules_; }
  /// Every checkpoint key some rule reads.
  std::vector<std::string> sources() const;

  /// Builds every rule's tensor from `checkpoint`. Throws `c10::Error` listing
  /// every missing key with the file it was looked for in (`files`: the file of
  /// each present key; `source` names the checkpoint).
  std::map<std::string, torch::Tensor> build(const std::map<std::string, torch::Tensor>& checkpoint,
                                             const std::string& source) const;

 private:
  std::vector<Rule> rules_;
};

/// Builds `map`'s tensors from `checkpoint` and loads them into `module`
/// (strict: every parameter and buffer needs a rule). Everything is checked
/// before anything is copied: missing checkpoint keys (named with the file),
/// shapes (both shapes and the rule's `shape_from`); on error the module is
/// unchanged. Values are converted to the module's dtype.
void load_checkpoint(torch::nn::Module& module,
                     const std::map<std::string, torch::Tensor>& checkpoint,
                     const CheckpointMap& map,
                     const std::string& source);

/// The `model_type`s `load_hf_encoder` takes: bert, roberta, distilbert
/// (post-norm text encoders), vit, deit (pre-norm vision encoders).
std::vector<std::string> hf_encoder_model_types();
/// The `model_type`s `load_hf_seq2seq` takes: bart, marian (post-norm), mbart
/// (pre-norm, with final encoder and decoder norms).
std::vector<std::string> hf_seq2seq_model_types();

/// One attention module of a Hugging Face checkpoint, as `load_hf_encoder`
/// or `load_hf_seq2seq` loads it.
struct HfAttentionBlock {
  /// The common prefix of its keys in the file (e.g. "encoder.layer.0.attention.").
  std::string prefix;
  /// The module it becomes (e.g. "layers.0.self_attn", "decoder.layers.1.multihead_attn").
  std::string module;
  /// Its options, from the config (with the layers' batch_first).
  MultiheadAttentionOptions options{1, 1};
  /// The dtype its query weight is stored in.
  torch::Dtype dtype = torch::kFloat32;
};

/// The attention modules of a supported checkpoint, encoder's then decoder's,
/// self-attention before cross-attention in each layer; throws `c10::Error`
/// for an unsupported model_type as the loaders do.
std::vector<HfAttentionBlock> hf_attention_blocks(const HfCheckpoint& checkpoint);

/// The C++ code that loads `checkpoint`: `load_hf_model` (the whole model),
/// and for an encoder or a seq2seq model also the layers-only path
/// (`load_hf_encoder`, `load_hf_seq2seq`); "" for an unsupported model_type.
std::string hf_load_code(const HfCheckpoint& checkpoint);

/// An encoder read from a Hugging Face checkpoint.
struct HfEncoder {
  /// The config's `model_type`.
  std::string model_type;
  /// Batch-first layers (and, for vit and deit, the final `layernorm` as the
  /// stack's `norm`), in eval mode; its input is the embeddings' output
  /// (transformers' `hidden_states[0]`), its output transformers'
  /// `last_hidden_state`. `enable_nested_tensor` is off, so padded positions
  /// are computed as transformers computes them.
  TransformerEncoder encoder{nullptr};
  /// The checkpoint's tensors the encoder does not hold (embeddings,
  /// positions, the embedding norm, the pooler ...), as float32, named as in
  /// the file without the base model's prefix (`bert.`, `vit.` ...).
  std::map<std::string, torch::Tensor> tensors;
  /// The layer options read from the config.
  TransformerEncoderLayerOptions layer_options{1, 1};
};

/// The layers-only path: most users want `load_hf_model` (mha/hf_models.h),
/// the whole model with its embeddings and pooler. This reads a Hugging Face
/// encoder's layers alone (`hf_encoder_model_types`): the options from
/// `config.json` (width, heads, FFN size, activation, `layer_norm_eps`, layer
/// count; the norm order by model_type), the layers' q/k/v concatenated into
/// `in_proj_weight`. Throws `c10::Error` for another model_type (naming it
/// and the supported ones), a missing key (naming it and its file) or a shape
/// the config does not give (both shapes and the config fields); nothing is
/// returned half-loaded.
///
/// Example:
/// ```
/// auto bert = mha::load_hf_encoder(mha::read_hf_checkpoint("bert-base-uncased"));
/// auto word = bert.tensors.at("embeddings.word_embeddings.weight");  // (V, E)
/// ```
HfEncoder load_hf_encoder(const HfCheckpoint& checkpoint);

/// A sequence-to-sequence model read from a Hugging Face checkpoint.
struct HfSeq2Seq {
  /// The config's `model_type`.
  std::string model_type;
  /// Batch first, eval mode: its encoder (`custom_encoder`, a
  /// `TransformerEncoder`) and decoder (`custom_decoder`, a
  /// `TransformerDecoder`) with mbart's final `layer_norm`s as their `norm`s.
  /// Their inputs are the embeddings' outputs (`encoder_hidden_states[0]`,
  /// `decoder_hidden_states[0]`).
  Transformer model{nullptr};
  /// `model`'s encoder.
  TransformerEncoder encoder{nullptr};
  /// `model`'s decoder.
  TransformerDecoder decoder{nullptr};
  /// The tensors the stacks do not hold, as float32, without the base model's
  /// prefix (`model.`): `shared.weight`, `encoder.embed_tokens.weight`,
  /// `decoder.embed_tokens.weight`, `encoder.embed_positions.weight`,
  /// `decoder.embed_positions.weight` (marian's sinusoids, which the files do
  /// not hold, computed as transformers computes them), `*.layernorm_embedding.*`,
  /// and `lm_head.weight` and `final_logits_bias` for a generating model. Tied
  /// weights absent from the file are given as the tensor they are tied to.
  std::map<std::string, torch::Tensor> tensors;
};

/// The layers-only path: most users want `load_hf_model` (mha/hf_models.h),
/// the whole `Seq2SeqLM` with its embeddings, head and `generate`. This reads
/// a Hugging Face sequence-to-sequence model's stacks alone
/// (`hf_seq2seq_model_types`) into a `mha::Transformer`, as `load_hf_encoder`
/// does for encoders.
HfSeq2Seq load_hf_seq2seq(const HfCheckpoint& checkpoint);

}  // namespace mha
