#pragma once

// Private: stage 5 of a cached or paged call (docs/architecture.md): where
// its keys and values come from. The pipeline (`attend_through_source`,
// run_plan.h) gives the source the call's projected rows; the source stores
// the new keys and values, then attends the queries over all it holds with
// the kernel the plan chooses (`choose_over_keys_kernel`,
// `choose_paged_kernel`). Its implementations are the module's front ends'
// (src/module/): a KVCache's, a PagedKVCache's.

#include <torch/types.h>

#include <tuple>

namespace mha {
namespace detail {

/// The keys and values of a cached or paged call.
class KeyValueSource {
 public:
  virtual ~KeyValueSource() = default;
  /// The call's projected queries `q` (..., E') and new keys and values `k`,
  /// `v` (..., E') (undefined: none, a static cache that holds its memory),
  /// as the projector gives them: the new keys and values stored, then the
  /// attention output (..., E') in `q`'s layout, and the weights or undefined.
  virtual std::tuple<torch::Tensor, torch::Tensor> attend(const torch::Tensor& q,
                                                          const torch::Tensor& k,
                                                          const torch::Tensor& v) = 0;
};

}  // namespace detail
}  // namespace mha
