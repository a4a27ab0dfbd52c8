#pragma once

// Private: the input checks of the module and the functional form, with
// Python's wording where Python has one.

#include <torch/types.h>

#include <cstdint>

#include "mha/multihead_attention.h"

namespace mha {
namespace detail {

/// Python's `_mha_shape_check`: ranks of query/key/value and of the masks;
/// returns whether the input is batched (3-D query).
bool mha_shape_check(const torch::Tensor& query,
                     const torch::Tensor& key,
                     const torch::Tensor& value,
                     const torch::Tensor& key_padding_mask,
                     const torch::Tensor& attn_mask,
                     int64_t num_heads);

/// `attn_mask` must be (L, S) or (N * H, L, S), as in Python's
/// `multi_head_attention_forward`.
void check_attn_mask_shape(const torch::Tensor& attn_mask,
                           int64_t tgt_len,
                           int64_t src_len,
                           int64_t bsz_times_heads);

/// Batched `key_padding_mask` must be (N, S) (Python's `_check_key_padding_mask`).
void check_key_padding_mask_shape(const torch::Tensor& key_padding_mask,
                                  int64_t src_len,
                                  int64_t bsz);

/// Python's "was expecting embedding dimension of {expected}, but got {actual}".
void check_embed_dim(int64_t actual, int64_t expected);

/// True when Python's `F.multi_head_attention_forward` drops `attn_mask` before
/// checking its shape: the causal hint wins when `is_causal`, no weights are
/// asked for and no `key_padding_mask` is given (off the native fast path,
/// which raises on a wrong shape).
inline bool causal_hint_drops_attn_mask(bool is_causal,
                                        bool need_weights,
                                        const torch::Tensor& key_padding_mask) {
  return is_causal && !need_weights && !key_padding_mask.defined();
}

/// The options' own checks of Python's `MultiheadAttention.__init__` (with
/// its wording) and of kdim/vdim: positive sizes, embed_dim divisible by
/// num_heads, dropout in [0, 1]. Throws `c10::ValueError`.
void check_module_options(const MultiheadAttentionOptions& options);

/// `query`, `key` and `value` must be defined tensors.
void check_defined(const torch::Tensor& query,
                   const torch::Tensor& key,
                   const torch::Tensor& value);

/// query, key and value (each may be undefined but the query) in the dtype
/// and on the device of `parameter`; the masks on the query's device.
void check_dtypes_and_devices(const torch::Tensor& parameter,
                              const torch::Tensor& query,
                              const torch::Tensor& key,
                              const torch::Tensor& value,
                              const torch::Tensor& key_padding_mask,
                              const torch::Tensor& attn_mask);

/// Feature sizes: query embed_dim (Python's wording), key kdim, value vdim
/// (key and value may be undefined).
void check_feature_sizes(const MultiheadAttentionOptions& options,
                         const torch::Tensor& query,
                         const torch::Tensor& key,
                         const torch::Tensor& value);

/// The module's checks before any work, beyond Python's own (which the
/// functional form repeats): Python's `_mha_shape_check`; dtypes and devices
/// equal to each other and to `parameter`'s; feature sizes against
/// embed_dim/kdim/vdim; batch and sequence sizes; mask shapes. Python reports
/// most of these from deep inside a matmul or view; here they name the
/// argument. `check_attn_mask_shape` is false where Python's path drops
/// `attn_mask` before checking its shape (the `is_causal` hint wins).
void check_module_inputs(const MultiheadAttentionOptions& options,
                         const torch::Tensor& parameter,
                         const torch::Tensor& query,
                         const torch::Tensor& key,
                         const torch::Tensor& value,
                         const torch::Tensor& key_padding_mask,
                         const torch::Tensor& attn_mask,
                         bool check_attn_mask_shape);

}  // namespace detail
}  // namespace mha
