#pragma once

// Private: the kernels of the cached and paged calls (`call_plan`'s
// kDecode, kOverKeys, kOverKeysWithWeights): attention of projected queries
// over keys and values that a key/value source gives (a KVCache's buffers, a
// sequence's paged blocks), with one additive mask. `run_plan` runs the one
// the plan chooses.

#include <torch/types.h>

#include <tuple>

namespace mha {
namespace detail {

/// kDecode: q (N, H, 1, hd) over keys, values (R, H, S, hd) read in place
/// by the paged decode kernel (each buffer row one block; query row i reads
/// row rows[i], int32 (N,), or row i where `rows` is undefined): -> (N, H, 1, hd).
torch::Tensor decode_over_keys(const torch::Tensor& q,
                               const torch::Tensor& keys,
                               const torch::Tensor& values,
                               const torch::Tensor& rows = {});

/// kOverKeys: SDPA of q (N, H, L, hd) over keys, values (N, H, S, hd) with
/// an additive `mask` broadcastable to (N, H, L, S) (undefined: none): -> (N, H, L, hd).
torch::Tensor sdpa_over_keys(const torch::Tensor& q,
                             const torch::Tensor& keys,
                             const torch::Tensor& values,
                             const torch::Tensor& mask);

/// kOverKeysWithWeights: the module's unfused softmax(q k^T / sqrt(hd) +
/// mask) v. Returns (N, H, L, hd) and the weights (N, H, L, S).
std::tuple<torch::Tensor, torch::Tensor> softmax_over_keys(const torch::Tensor& q,
                                                           const torch::Tensor& keys,
                                                           const torch::Tensor& values,
                                                           const torch::Tensor& mask);

}  // namespace detail
}  // namespace mha
