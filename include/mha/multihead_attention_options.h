#pragma once

// mha::MultiheadAttentionOptions: Python's `torch.nn.MultiheadAttention`
// constructor arguments, on their own so that what only describes an
// attention (a checkpoint's attention blocks, say) needs no module.

#include <torch/arg.h>

#include <cstdint>
#include <optional>

namespace mha {

/// Options for `mha::MultiheadAttention`, with the names and defaults of
/// Python's `torch.nn.MultiheadAttention(embed_dim, num_heads, ...)`.
/// See https://pytorch.org/docs/stable/generated/torch.nn.MultiheadAttention.html
///
/// Example:
/// ```
/// mha::MultiheadAttention attn(
///     mha::MultiheadAttentionOptions(512, 8).dropout(0.1).batch_first(true));
/// ```
struct MultiheadAttentionOptions {
  /// `embed_dim` is the model width E; `num_heads` must divide it.
  MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads)
      : embed_dim_(embed_dim), num_heads_(num_heads) {}

  /// The checks of Python's constructor, with its wording, and of kdim/vdim:
  /// positive sizes, embed_dim divisible by num_heads, dropout in [0, 1].
  /// Throws `c10::ValueError`. `reset()` calls it first.
  void validate() const;

  /// Total dimension of the model (E).
  TORCH_ARG(int64_t, embed_dim);
  /// Number of parallel heads; each head has `embed_dim / num_heads` features.
  TORCH_ARG(int64_t, num_heads);
  /// Dropout probability on the attention weights, applied only in training.
  TORCH_ARG(double, dropout) = 0.0;
  /// Adds biases to the input and output projections.
  TORCH_ARG(bool, bias) = true;
  /// Appends learned bias rows (`bias_k`, `bias_v`) to the key and value sequences.
  TORCH_ARG(bool, add_bias_kv) = false;
  /// Appends a zero row to the projected key and value sequences.
  TORCH_ARG(bool, add_zero_attn) = false;
  /// Feature size of `key`; unset means `embed_dim`.
  TORCH_ARG(std::optional<int64_t>, kdim) = std::nullopt;
  /// Feature size of `value`; unset means `embed_dim`.
  TORCH_ARG(std::optional<int64_t>, vdim) = std::nullopt;
  /// Batched inputs and outputs are (N, L, E) instead of (L, N, E).
  TORCH_ARG(bool, batch_first) = false;
};

}  // namespace mha
