#pragma once

// Private: `multi_head_attention_forward` with its in-projection replaced, for
// callers that hold only some heads' projection rows (mha/tensor_parallel.h).

#include <torch/types.h>

#include <functional>
#include <tuple>

#include "mha/functional.h"

namespace mha {
namespace detail {

/// Projects sequence-first q (L, N, E), k (S, N, kdim), v (S, N, vdim) to
/// (L, N, E'), (S, N, E'), (S, N, E') with E' = head_dim * num_heads.
using InProjection = std::function<std::tuple<torch::Tensor, torch::Tensor, torch::Tensor>(
    const torch::Tensor&, const torch::Tensor&, const torch::Tensor&)>;

/// `functional::multi_head_attention_forward` with `project` in place of the
/// in-projection (and its weight checks); `options.num_heads()` heads of
/// E' / num_heads features each, and an `out_proj_weight` of E' columns.
std::tuple<torch::Tensor, torch::Tensor> multi_head_attention_forward_with(
    const torch::Tensor& query,
    const torch::Tensor& key,
    const torch::Tensor& value,
    const functional::MultiheadAttentionForwardFuncOptions& options,
    const InProjection& project);

}  // namespace detail
}  // namespace mha
