// hf_attention_blocks and hf_load_code: what mha-parity --list prints for a
// Hugging Face model directory.

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <mha/hf_models.h>
#include <mha/hugging_face.h>

#include <algorithm>

#include "hugging_face/architectures.h"

namespace mha {
namespace {

/// The longest common prefix of `keys` that ends with '.'.
std::string common_prefix(const std::vector<std::string>& keys) {
  std::string prefix = keys.front();
  for (const auto& key : keys) {
    prefix.resize(std::mismatch(prefix.begin(), prefix.end(), key.begin(), key.end()).first -
                  prefix.begin());
  }
  const auto dot = prefix.rfind('.');
  return dot == std::string::npos ? "" : prefix.substr(0, dot + 1);
}

/// The stack's attention blocks; `base` is the prefix the file's keys carry.
void add_blocks(std::vector<HfAttentionBlock>& out,
                const HfCheckpoint& checkpoint,
                const detail::HfStack& stack,
                const std::string& to_prefix,
                const std::string& base) {
  const auto& n = stack.names;
  for (int64_t i = 0; i < stack.num_layers; ++i) {
    const std::string from = fmt::format("{}{}{}.", base, stack.layer_prefix, i);
    const std::string to = fmt::format("{}layers.{}.", to_prefix, i);
    auto add = [&](const std::string& q, const std::string& k, const std::string& v,
                   const std::string& o, const std::string& module) {
      HfAttentionBlock block;
      block.prefix = common_prefix({from + q, from + k, from + v, from + o});
      block.module = to + module;
      block.options = MultiheadAttentionOptions(stack.options.d_model(), stack.options.nhead())
                          .batch_first(stack.options.batch_first());
      const auto weight = checkpoint.tensors.find(from + q + ".weight");
      if (weight != checkpoint.tensors.end()) {
        block.dtype = weight->second.scalar_type();
      }
      out.push_back(std::move(block));
    };
    if (n.qkv.empty()) {
      add(n.q, n.k, n.v, n.out, "self_attn");
    } else {
      add(n.qkv, n.qkv, n.qkv, n.out, "self_attn");
    }
    if (!n.cross_q.empty()) {
      add(n.cross_q, n.cross_k, n.cross_v, n.cross_out, "multihead_attn");
    }
  }
}

}  // namespace

std::vector<HfAttentionBlock> hf_attention_blocks(const HfCheckpoint& checkpoint) {
  const detail::HfKind kind =
      detail::hf_kind(checkpoint.model_type).value_or(detail::HfKind::kEncoder);
  const detail::HfArchitecture arch = detail::hf_architecture(checkpoint, kind);
  const std::string base = detail::file_prefix(checkpoint, arch);
  // The modules' names in what load_hf_encoder, load_hf_seq2seq and
  // load_hf_model's CausalLM return.
  const char* to = kind == detail::HfKind::kSeq2Seq  ? "encoder."
                   : kind == detail::HfKind::kCausal ? "decoder."
                                                     : "";
  std::vector<HfAttentionBlock> out;
  add_blocks(out, checkpoint, arch.encoder, to, base);
  if (arch.decoder) {
    add_blocks(out, checkpoint, *arch.decoder, "decoder.", base);
  }
  return out;
}

std::string hf_load_code(const HfCheckpoint& checkpoint) {
  const auto kind = detail::hf_kind(checkpoint.model_type);
  if (!kind) {
    return "";
  }
  const std::string whole =
      fmt::format("auto model = mha::load_hf_model(\"{}\").as<mha::{}>();", checkpoint.directory,
                  hf_model_class(checkpoint.model_type));
  if (*kind == detail::HfKind::kCausal) {
    return whole;
  }
  return fmt::format(
      "auto stacks = mha::load_hf_{}(mha::read_hf_checkpoint(\"{}\"));  // the layers alone\n{}",
      *kind == detail::HfKind::kEncoder ? "encoder" : "seq2seq", checkpoint.directory, whole);
}

}  // namespace mha
