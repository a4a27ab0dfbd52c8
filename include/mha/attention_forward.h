#pragma once

// The `forward` of Python's `torch.nn.MultiheadAttention` (its arguments,
// their order and defaults) and its parameters, written once for mha's
// attention modules.

#include <torch/nn/modules/common.h>
#include <torch/nn/modules/container/any_value.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <tuple>

namespace mha {
namespace detail {
struct AttentionCall;
}  // namespace detail

/// The base of the modules that compute Python's `MultiheadAttention.forward`
/// (`MultiheadAttentionImpl`, `TensorParallelMultiheadAttentionImpl`): its
/// `forward` takes Python's arguments and hands them, as one call, to the
/// module's `forward_call`.
class AttentionForward {
 public:
  virtual ~AttentionForward() = default;

  /// Computes attention as Python's `MultiheadAttention.forward`.
  ///
  /// Shapes (L target length, S source length, N batch, E embed_dim):
  /// query (L, N, E), (N, L, E) with `batch_first`, or unbatched (L, E);
  /// key/value likewise with S and kdim/vdim; `key_padding_mask` (N, S) or (S),
  /// bool (true = ignore) or float (added); `attn_mask` (L, S) or
  /// (N * num_heads, L, S), bool (true = may not attend) or float (added).
  /// Returns the output, shaped as query, and the attention weights,
  /// (N, L, S) averaged or (N, num_heads, L, S) per head, or an undefined
  /// tensor when `need_weights` is false. `is_causal` is a hint that
  /// `attn_mask` is the causal mask; as in Python it needs `attn_mask`.
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& query,
                                                   const torch::Tensor& key,
                                                   const torch::Tensor& value,
                                                   const torch::Tensor& key_padding_mask = {},
                                                   bool need_weights = true,
                                                   const torch::Tensor& attn_mask = {},
                                                   bool average_attn_weights = true,
                                                   bool is_causal = false);

 protected:
  /// The module's computation of one call: `forward`'s arguments.
  virtual std::tuple<torch::Tensor, torch::Tensor> forward_call(
      const detail::AttentionCall& call) = 0;
};

/// The parameters of Python's `MultiheadAttention`, named as its
/// `state_dict` names them. `MultiheadAttentionImpl` holds the whole module's
/// (E' = E); `TensorParallelMultiheadAttentionImpl` this rank's shard of each
/// (E' = E / world size rows of the input projections and their bias, columns
/// of `bias_k`/`bias_v` and of `out_proj.weight`, whose bias stays whole).
struct AttentionParameters {
  /// Packed [q; k; v] input projection (3E', E), when kdim == vdim == embed_dim.
  torch::Tensor in_proj_weight;
  /// Separate input projections (E', E), (E', kdim), (E', vdim), otherwise.
  torch::Tensor q_proj_weight;
  /// See `q_proj_weight`.
  torch::Tensor k_proj_weight;
  /// See `q_proj_weight`.
  torch::Tensor v_proj_weight;
  /// Packed input projection bias (3E'), when `bias`.
  torch::Tensor in_proj_bias;
  /// Learned key/value bias rows (1, 1, E'), when `add_bias_kv`.
  torch::Tensor bias_k;
  /// See `bias_k`.
  torch::Tensor bias_v;
  /// Output projection E' -> E, registered as the submodule `out_proj`.
  torch::nn::Linear out_proj{nullptr};
};

}  // namespace mha

/// `AttentionForward::forward`'s defaults (Python's: no masks,
/// `need_weights`, `average_attn_weights`, not causal) for `AnyModule` and
/// `Sequential`, in an attention module class's `protected:` part.
#define MHA_ATTENTION_FORWARD_DEFAULT_ARGS                            \
  FORWARD_HAS_DEFAULT_ARGS({3, torch::nn::AnyValue(torch::Tensor())}, \
                           {4, torch::nn::AnyValue(true)},            \
                           {5, torch::nn::AnyValue(torch::Tensor())}, \
                           {6, torch::nn::AnyValue(true)}, {7, torch::nn::AnyValue(false)})
