#pragma once

// Private: the kernel of the cached and paged calls: attention of projected
// queries over keys and values that a key/value source gives (a KVCache's
// buffers, a sequence's paged blocks), with one additive mask.

#include <torch/types.h>

#include <tuple>

namespace mha {
namespace detail {

/// Attention of q (N, H, L, hd) over keys, values (N, H, S, hd) with an
/// additive `mask` broadcastable to (N, H, L, S) (undefined: none): SDPA, or,
/// with weights, the module's unfused softmax(q k^T / sqrt(hd) + mask) v; one
/// query per sequence without a mask or weights (a decode step), the paged
/// decode kernel over the buffers in place (each sequence one block).
/// Returns (N, H, L, hd) and the weights (N, H, L, S) or undefined.
std::tuple<torch::Tensor, torch::Tensor> attend_over_keys(const torch::Tensor& q,
                                                          const torch::Tensor& keys,
                                                          const torch::Tensor& values,
                                                          const torch::Tensor& mask,
                                                          bool need_weights);

}  // namespace detail
}  // namespace mha
