// find_attention_blocks: groups a state_dict's keys by the prefix before an
// attention's tensor names, then keeps the groups whose tensors form one.

#include <c10/util/Exception.h>
#include <mha/attention_blocks.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <optional>
#include <utility>

#include "state_dict/block_summary.h"

namespace mha {
namespace {

using Entry = std::pair<const std::string, torch::Tensor>;

/// The tensors of an attention block, in Python's `state_dict()` order
/// (torch/nn/modules/activation.py, MultiheadAttention.__init__), then
/// timm's qkv/proj names (timm/models/vision_transformer.py, Attention).
enum Part {
  kInProjWeight,
  kQProjWeight,
  kKProjWeight,
  kVProjWeight,
  kInProjBias,
  kBiasK,
  kBiasV,
  kOutProjWeight,
  kOutProjBias,
  kQkvWeight,
  kQkvBias,
  kProjWeight,
  kProjBias,
  kParts
};

constexpr std::array<const char*, kParts> kPartNames{
    "in_proj_weight", "q_proj_weight", "k_proj_weight",   "v_proj_weight", "in_proj_bias",
    "bias_k",         "bias_v",        "out_proj.weight", "out_proj.bias", "qkv.weight",
    "qkv.bias",       "proj.weight",   "proj.bias"};

/// The entries of one prefix, by part (null where absent).
using Group = std::array<const Entry*, kParts>;

/// The prefix of `key` before `name`, when `key` is `name` or ends with "." + name.
std::optional<std::string> prefix_before(const std::string& key, const std::string& name) {
  if (key.size() < name.size() || key.compare(key.size() - name.size(), name.size(), name) != 0) {
    return std::nullopt;
  }
  const size_t at = key.size() - name.size();
  if (at != 0 && key[at - 1] != '.') {
    return std::nullopt;
  }
  return key.substr(0, at);
}

bool is_matrix(const Entry* entry) { return entry != nullptr && entry->second.dim() == 2; }

/// The block of `group`'s parts in [first, last), its keys and dtype.
AttentionBlock make_block(const std::string& prefix,
                          const Group& group,
                          Part first,
                          Part last,
                          const torch::Tensor& out_weight) {
  AttentionBlock block;
  block.prefix = prefix;
  block.embed_dim = out_weight.size(0);
  block.kdim = block.vdim = block.embed_dim;
  block.dtype = out_weight.scalar_type();
  for (int part = first; part < last; ++part) {
    if (group[part] != nullptr) {
      block.keys.push_back(group[part]->first);
    }
  }
  return block;
}

/// nn.MultiheadAttention: out_proj.weight (E, E'), and in_proj_weight (3E, E)
/// or q_proj_weight (E, E), k_proj_weight (E, kdim), v_proj_weight (E, vdim).
std::optional<AttentionBlock> multihead_block(const std::string& prefix, const Group& group) {
  const bool packed = is_matrix(group[kInProjWeight]);
  const bool separate = is_matrix(group[kQProjWeight]) && is_matrix(group[kKProjWeight]) &&
                        is_matrix(group[kVProjWeight]);
  if (!is_matrix(group[kOutProjWeight]) || !(packed || separate)) {
    return std::nullopt;
  }
  AttentionBlock block =
      make_block(prefix, group, kInProjWeight, kQkvWeight, group[kOutProjWeight]->second);
  block.naming = AttentionNaming::kMultiheadAttention;
  block.packed = packed;
  if (!packed) {
    block.kdim = group[kKProjWeight]->second.size(1);
    block.vdim = group[kVProjWeight]->second.size(1);
  }
  block.bias = group[kInProjBias] != nullptr;
  block.add_bias_kv = group[kBiasK] != nullptr && group[kBiasV] != nullptr;
  return block;
}

/// timm's Attention: qkv.weight (3E, E) and proj.weight (E, E).
std::optional<AttentionBlock> qkv_proj_block(const std::string& prefix, const Group& group) {
  if (!is_matrix(group[kQkvWeight]) || !is_matrix(group[kProjWeight])) {
    return std::nullopt;
  }
  const auto qkv = group[kQkvWeight]->second.sizes();
  const auto proj = group[kProjWeight]->second.sizes();
  if (proj[0] != proj[1] || qkv[0] != 3 * proj[0] || qkv[1] != proj[0]) {
    return std::nullopt;
  }
  AttentionBlock block = make_block(prefix, group, kQkvWeight, kParts, group[kProjWeight]->second);
  block.naming = AttentionNaming::kQkvProj;
  block.bias = group[kQkvBias] != nullptr;
  return block;
}

}  // namespace

MultiheadAttentionOptions AttentionBlock::options(int64_t num_heads) const {
  MultiheadAttentionOptions result(embed_dim, num_heads);
  result.bias(bias).add_bias_kv(add_bias_kv);
  if (!packed) {
    result.kdim(kdim).vdim(vdim);
  }
  return result;
}

std::vector<AttentionBlock> find_attention_blocks(
    const std::map<std::string, torch::Tensor>& state_dict) {
  std::map<std::string, Group> groups;
  for (const auto& entry : state_dict) {
    for (int part = 0; part < kParts; ++part) {
      if (const auto prefix = prefix_before(entry.first, kPartNames[part])) {
        groups[*prefix][part] = &entry;  // a new prefix starts with every part null
        break;
      }
    }
  }
  std::vector<AttentionBlock> blocks;
  for (const auto& [prefix, group] : groups) {
    for (auto block : {multihead_block(prefix, group), qkv_proj_block(prefix, group)}) {
      if (block) {
        blocks.push_back(std::move(*block));
      }
    }
  }
  std::stable_sort(blocks.begin(), blocks.end(), [](const auto& a, const auto& b) {
    return detail::natural_less(a.prefix, b.prefix);
  });
  return blocks;
}

std::vector<AttentionBlock> find_attention_blocks(const std::string& path) {
  std::error_code error;
  TORCH_CHECK_VALUE(
      !std::filesystem::is_regular_file(std::filesystem::path(path) / "config.json", error), path,
      ": a model directory, not a weights file; for a Hugging Face model directory "
      "the attention blocks are mha::hf_attention_blocks(mha::read_hf_checkpoint(\"",
      path, "\")), as `mha-parity --list DIR` prints them");
  return find_attention_blocks(read_state_dict(path));
}

}  // namespace mha
