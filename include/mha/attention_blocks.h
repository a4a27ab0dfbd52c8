#pragma once

// Finding the attention modules in a weights file: every group of keys that
// forms a `torch.nn.MultiheadAttention` (or a timm-style qkv/proj attention),
// with its prefix and what its tensors say of its options.

#include <mha/multihead_attention_options.h>
#include <mha/state_dict.h>
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mha {

/// How an attention block names its tensors.
enum class AttentionNaming {
  /// Python's `nn.MultiheadAttention`: `in_proj_weight` (or `q_proj_weight`,
  /// `k_proj_weight`, `v_proj_weight`), `in_proj_bias`, `bias_k`, `bias_v`,
  /// `out_proj.weight`, `out_proj.bias`.
  kMultiheadAttention,
  /// timm's ViT attention: `qkv.weight`, `qkv.bias`, `proj.weight`,
  /// `proj.bias`; load it with `LoadOptions().key_map(KeyMap::vit())`.
  kQkvProj,
};

/// One attention module of a state_dict: the prefix of its keys and the
/// options its tensors imply. `num_heads` is not among them: a state_dict
/// does not store it (the tensors have the same shapes for every head count),
/// so it must come from the model's configuration.
struct AttentionBlock {
  /// The keys' common prefix, ending with '.' (empty for a file that holds one
  /// attention alone): what `LoadOptions::prefix` takes.
  std::string prefix;
  AttentionNaming naming = AttentionNaming::kMultiheadAttention;
  /// The model width E (rows of `out_proj.weight` or `proj.weight`).
  int64_t embed_dim = 0;
  /// Feature sizes of key and value (columns of `k_proj_weight` and
  /// `v_proj_weight`); `embed_dim` when the projection is packed.
  int64_t kdim = 0;
  int64_t vdim = 0;
  /// `in_proj_bias` (or `qkv.bias`) is present.
  bool bias = true;
  /// `bias_k` and `bias_v` are present.
  bool add_bias_kv = false;
  /// One packed [q; k; v] projection (`in_proj_weight`, `qkv.weight`), as
  /// Python builds when kdim == vdim == embed_dim; else `q_proj_weight`,
  /// `k_proj_weight` and `v_proj_weight`.
  bool packed = true;
  /// The dtype of the output projection's weight.
  torch::Dtype dtype = torch::kFloat32;
  /// The block's keys, with the prefix, in Python's `state_dict()` order.
  std::vector<std::string> keys;

  /// Options of a `MultiheadAttention` that loads this block (with
  /// `KeyMap::vit()` for `AttentionNaming::kQkvProj`); `batch_first`,
  /// `dropout` and `add_zero_attn` are left at their defaults, as a
  /// state_dict does not record them either.
  MultiheadAttentionOptions options(int64_t num_heads) const;

  /// The C++ that builds a module for this block and loads it from `file`:
  /// its options (`kdim`/`vdim` for separate q/k/v, `batch_first(true)` and
  /// `KeyMap::vit()` for timm's qkv/proj names), `num_heads` left to the
  /// model's configuration, and its prefix.
  std::string load_code(const std::string& file) const;
};

/// The attention blocks among `state_dict`'s keys, ordered by prefix with
/// numbers compared as numbers (`layers.2.` before `layers.10.`). A group of
/// keys is a block when it has an output projection and an input projection
/// (packed or all three separate) of two-dimensional tensors; `qkv`/`proj`
/// groups also need `qkv.weight` of shape (3E, E) and `proj.weight` of (E, E).
std::vector<AttentionBlock> find_attention_blocks(
    const std::map<std::string, torch::Tensor>& state_dict);

/// The attention blocks of a weights file (any format of `read_state_dict`).
/// A Hugging Face model directory (with a `config.json`) is a `c10::ValueError`
/// that names `hf_attention_blocks` (mha/hugging_face.h), which lists its
/// blocks with the options from its config.
///
/// Example:
/// ```
/// for (const auto& block : mha::find_attention_blocks("vit_b_16.pth")) {
///   std::cout << block.prefix << " embed_dim=" << block.embed_dim << "\n";
/// }
/// ```
std::vector<AttentionBlock> find_attention_blocks(const std::string& path);

/// A one-line summary of `blocks`, grouping the prefixes that differ only in
/// their numbers: "12 attention blocks under
/// encoder.layers.encoder_layer_{0..11}.self_attention. (embed_dim=768)", or
/// "no attention blocks".
std::string summarize_attention_blocks(const std::vector<AttentionBlock>& blocks);

}  // namespace mha
