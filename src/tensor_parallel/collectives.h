#pragma once

// Private: the collectives of tensor-parallel attention, and Megatron-LM's
// autograd operators built on them (identity one way, a collective the other).

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <vector>

namespace mha {
namespace detail {

/// Sums `tensor` (contiguous) over `group` in place and waits. A failed or
/// timed-out collective throws `c10::Error` naming `what`, the rank and the
/// group's error.
void all_reduce_sum(c10d::Backend& group, torch::Tensor& tensor, const std::string& what);

/// Every rank's `tensor` (same shape on all ranks), in rank order.
std::vector<torch::Tensor> all_gather(c10d::Backend& group,
                                      const torch::Tensor& tensor,
                                      const std::string& what);

/// Every rank's `tensor` (same shape on all ranks) concatenated along `dim`,
/// in rank order.
torch::Tensor all_gather_cat(c10d::Backend& group,
                             const torch::Tensor& tensor,
                             int64_t dim,
                             const std::string& what);

/// Megatron's "f": `x` unchanged; its gradient is all-reduced, so a
/// replicated input gets the whole gradient on every rank.
torch::Tensor copy_to_tensor_parallel(const torch::Tensor& x,
                                      const c10::intrusive_ptr<c10d::Backend>& group);

/// Megatron's "g": the sum of the ranks' `partial`; the gradient passes
/// unchanged (the output is replicated, so is its gradient).
torch::Tensor reduce_from_tensor_parallel(const torch::Tensor& partial,
                                          const c10::intrusive_ptr<c10d::Backend>& group);

/// The ranks' `local` concatenated along `dim` (each rank's slices of a
/// replicated result); the gradient is this rank's slice of it.
torch::Tensor gather_from_tensor_parallel(const torch::Tensor& local,
                                          int64_t dim,
                                          const c10::intrusive_ptr<c10d::Backend>& group);

}  // namespace detail
}  // namespace mha
