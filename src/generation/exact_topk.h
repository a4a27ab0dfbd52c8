#pragma once

// Private: at::topk's answer for the top-k of decoding's wide score rows,
// found in one pass.

#include <torch/types.h>

#include <cstdint>
#include <tuple>

namespace mha {
namespace detail {

/// `at::topk(scores, k)` (largest, sorted) of `scores` (N, M): the same values
/// and indices, bit for bit, ties and NaN included. ATen's CPU kernel runs
/// `std::partial_sort` over all M entries of a row; here one vectorized pass
/// finds the few entries that can enter its heap, and the same partial sort
/// over just those moves them the same way. An input other than a float32
/// CPU matrix with k <= 64 and 64 k <= M (where ATen partially sorts) goes to
/// `at::topk` itself.
std::tuple<torch::Tensor, torch::Tensor> exact_topk(const torch::Tensor& scores, int64_t k);

}  // namespace detail
}  // namespace mha
