#pragma once

// The `forward` of Python's `torch.nn.MultiheadAttention` (its arguments,
// their order and defaults), written once for mha's attention modules.

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

}  // namespace mha
