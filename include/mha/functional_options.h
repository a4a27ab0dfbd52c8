#pragma once

// The arguments of `mha::functional::multi_head_attention_forward`, apart
// from the function so that the attention pipeline below it can take them.

#include <torch/arg.h>
#include <torch/types.h>

#include <cstdint>

namespace mha {
namespace functional {

/// Arguments of `multi_head_attention_forward` besides query, key and value,
/// with the names and defaults of Python's
/// `torch.nn.functional.multi_head_attention_forward`. Undefined tensors play
/// the role of Python's `None`.
struct MultiheadAttentionForwardFuncOptions {
  /// The arguments Python takes positionally.
  MultiheadAttentionForwardFuncOptions(int64_t embed_dim_to_check,
                                       int64_t num_heads,
                                       torch::Tensor in_proj_weight,
                                       torch::Tensor in_proj_bias,
                                       torch::Tensor bias_k,
                                       torch::Tensor bias_v,
                                       bool add_zero_attn,
                                       double dropout_p,
                                       torch::Tensor out_proj_weight,
                                       torch::Tensor out_proj_bias);

  /// Expected feature size of `query` (E).
  TORCH_ARG(int64_t, embed_dim_to_check);
  /// Number of heads H; must divide E.
  TORCH_ARG(int64_t, num_heads);
  /// Packed (3E, E) projection, used unless `use_separate_proj_weight`.
  TORCH_ARG(torch::Tensor, in_proj_weight);
  /// Packed (3E) projection bias, or undefined.
  TORCH_ARG(torch::Tensor, in_proj_bias);
  /// (1, 1, E) key bias row, or undefined.
  TORCH_ARG(torch::Tensor, bias_k);
  /// (1, 1, E) value bias row, or undefined.
  TORCH_ARG(torch::Tensor, bias_v);
  /// Append a zero row to the projected keys and values.
  TORCH_ARG(bool, add_zero_attn);
  /// Dropout probability on the attention weights (training only).
  TORCH_ARG(double, dropout_p);
  /// (E, E) output projection.
  TORCH_ARG(torch::Tensor, out_proj_weight);
  /// (E) output projection bias, or undefined.
  TORCH_ARG(torch::Tensor, out_proj_bias);
  /// Dropout is applied only when true.
  TORCH_ARG(bool, training) = true;
  /// (N, S) or (S): bool (true = ignore the key) or float (added).
  TORCH_ARG(torch::Tensor, key_padding_mask) = {};
  /// Return the attention weights (unfused path) or not (SDPA path).
  TORCH_ARG(bool, need_weights) = true;
  /// (L, S) or (N * H, L, S): bool (true = may not attend) or float (added).
  TORCH_ARG(torch::Tensor, attn_mask) = {};
  /// Use `q_proj_weight`, `k_proj_weight`, `v_proj_weight` instead of `in_proj_weight`.
  TORCH_ARG(bool, use_separate_proj_weight) = false;
  /// (E, E) query projection, with `use_separate_proj_weight`.
  TORCH_ARG(torch::Tensor, q_proj_weight) = {};
  /// (E, kdim) key projection, with `use_separate_proj_weight`.
  TORCH_ARG(torch::Tensor, k_proj_weight) = {};
  /// (E, vdim) value projection, with `use_separate_proj_weight`.
  TORCH_ARG(torch::Tensor, v_proj_weight) = {};
  /// (N * H, S, E / H) projected keys that replace the computed ones.
  TORCH_ARG(torch::Tensor, static_k) = {};
  /// (N * H, S, E / H) projected values that replace the computed ones.
  TORCH_ARG(torch::Tensor, static_v) = {};
  /// Average the returned weights over heads.
  TORCH_ARG(bool, average_attn_weights) = true;
  /// Hint that `attn_mask` is the causal mask.
  TORCH_ARG(bool, is_causal) = false;
};

}  // namespace functional
}  // namespace mha
