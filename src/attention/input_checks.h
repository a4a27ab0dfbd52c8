#pragma once

// Private: the input checks of the module and the functional form, with
// Python's wording where Python has one.

#include <torch/types.h>

#include <cstdint>

#include "attention/attention_call.h"
#include "mha/multihead_attention_options.h"

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

/// `query`, `key` and `value` must be defined tensors.
void check_defined(const torch::Tensor& query,
                   const torch::Tensor& key,
                   const torch::Tensor& value);

/// `t` (the argument `name`) in the dtype and on the device of `parameter`.
/// Throws a plain c10::Error (Python's RuntimeError) naming both dtypes.
void check_dtype_and_device(const torch::Tensor& parameter,
                            const torch::Tensor& t,
                            const char* name);

/// `mask` (the argument `name`; may be undefined) on the device of `input`
/// (the argument `input_name`).
void check_mask_device(const torch::Tensor& mask,
                       const char* name,
                       const torch::Tensor& input,
                       const char* input_name);

/// The call's query, key and value (key and value may be undefined: a
/// filled static cache) in the dtype and on the device of `parameter`; its
/// masks on the query's device.
void check_dtypes_and_devices(const torch::Tensor& parameter, const AttentionCall& call);

/// Feature sizes: query embed_dim (Python's wording), key kdim, value vdim
/// (key and value may be undefined).
void check_feature_sizes(const MultiheadAttentionOptions& options,
                         const torch::Tensor& query,
                         const torch::Tensor& key,
                         const torch::Tensor& value);

/// The module's checks before any work, beyond Python's own: Python's
/// `_mha_shape_check`; dtypes and devices
/// equal to each other and to `parameter`'s; feature sizes against
/// embed_dim/kdim/vdim; batch and sequence sizes; mask shapes. Python reports
/// most of these from deep inside a matmul or view; here they name the
/// argument. `check_attn_mask_shape` is false where Python's path drops
/// `attn_mask` before checking its shape (the `is_causal` hint wins).
void check_module_inputs(const MultiheadAttentionOptions& options,
                         const torch::Tensor& parameter,
                         const AttentionCall& call,
                         bool check_attn_mask_shape);

}  // namespace detail
}  // namespace mha
