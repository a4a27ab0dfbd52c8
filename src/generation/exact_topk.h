#pragma once

// Private: at::topk's answer for the top-k of decoding's wide score rows,
// found in one pass.

#include <torch/types.h>

#include <cstdint>
#include <tuple>

namespace mha {
namespace detail {

/// `at::topk(scores, k)` (largest, sorted) of `scores` (N, M): the same values
/// and indices, bit for bit. One pass over each row keeps its k + 1 largest
/// values; where these are all distinct the answer is unique (whatever order
/// ATen's partial sort visits ties in), so it is returned. A row with a tie
/// among them or a NaN, or an input other than a float32 CPU matrix with
/// k < M and k <= 64, goes to `at::topk` itself.
std::tuple<torch::Tensor, torch::Tensor> exact_topk(const torch::Tensor& scores, int64_t k);

}  // namespace detail
}  // namespace mha
