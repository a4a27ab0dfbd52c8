#pragma once

// Private: the input checks shared by the module and the functional form, with
// Python's wording.

#include <torch/types.h>

#include <cstdint>

namespace mha {
namespace detail {

/// Python's `_mha_shape_check`: ranks of query/key/value and of the masks;
/// returns whether the input is batched (3-D query).
bool mha_shape_check(
    const torch::Tensor& query,
    const torch::Tensor& key,
    const torch::Tensor& value,
    const torch::Tensor& key_padding_mask,
    const torch::Tensor& attn_mask,
    int64_t num_heads);

/// `attn_mask` must be (L, S) or (N * H, L, S), as in Python's
/// `multi_head_attention_forward`.
void check_attn_mask_shape(
    const torch::Tensor& attn_mask,
    int64_t tgt_len,
    int64_t src_len,
    int64_t bsz_times_heads);

/// Batched `key_padding_mask` must be (N, S) (Python's `_check_key_padding_mask`).
void check_key_padding_mask_shape(
    const torch::Tensor& key_padding_mask,
    int64_t src_len,
    int64_t bsz);

}  // namespace detail
}  // namespace mha
