#pragma once

#include <torch/arg.h>
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <tuple>

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

/// Python's `F.multi_head_attention_forward` in sequence-first layout:
/// query (L, N, E) or (L, E), key (S, N, kdim) or (S, kdim), value likewise.
/// Returns (output, weights); weights are undefined unless `need_weights`.
std::tuple<torch::Tensor, torch::Tensor> multi_head_attention_forward(
    const torch::Tensor& query,
    const torch::Tensor& key,
    const torch::Tensor& value,
    const MultiheadAttentionForwardFuncOptions& options);

/// Python's `F._canonical_mask`: a bool mask becomes an additive float mask of
/// `target_type` (true -> -inf, false -> 0); a float mask is returned as is;
/// other dtypes are rejected. Warns, as Python does, when `other_type` is given
/// and differs from the mask's dtype.
torch::Tensor canonical_mask(const torch::Tensor& mask,
                             const std::string& mask_name,
                             std::optional<c10::ScalarType> other_type,
                             const std::string& other_name,
                             c10::ScalarType target_type,
                             bool check_other = true);

}  // namespace functional
}  // namespace mha
