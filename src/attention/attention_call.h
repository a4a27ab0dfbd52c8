#pragma once

// Private: the arguments of one attention call, as Python's
// `MultiheadAttention.forward` names them, passed as one value from the front
// ends (the module, the layers, tensor parallelism) to the plan and kernels.

#include <torch/types.h>

namespace mha {
namespace detail {

/// One call's inputs; shapes as in `MultiheadAttentionImpl::forward`.
struct AttentionCall {
  const torch::Tensor& query;
  const torch::Tensor& key;
  const torch::Tensor& value;
  const torch::Tensor& key_padding_mask;  ///< undefined: none
  const torch::Tensor& attn_mask;         ///< undefined: none
  bool need_weights;
  bool average_attn_weights;
  bool is_causal;

  /// Self-attention by identity, as Python's fast path tests it.
  bool is_self_attention() const { return query.is_same(key) && key.is_same(value); }
  /// Whether either mask is given.
  bool masked() const { return key_padding_mask.defined() || attn_mask.defined(); }
};

}  // namespace detail
}  // namespace mha
