#pragma once

// Private: a cached, paged or packed call, given its plan (`plan_stored_call`):
// the projector's one entry, the new keys and values into the store, the
// kernels the plan chose over what the store gives back, the output
// projection. The front ends (src/module/) check the call, plan it, then run it.

#include <torch/types.h>

#include <tuple>

#include "attention/attention_weights.h"
#include "attention/call_plan.h"
#include "attention/key_value_store.h"

namespace mha {

namespace detail {

/// Computes `call` on `module` as `plan` says: `query`, `key`, `value` as the
/// module takes them (kDense batched; kPaged and kPacked rows (T, E)), their
/// new keys and values written into `store` (kPacked: none, each sequence
/// attends over its own rows). The call is validated. Returns (output shaped
/// as query, the weights (N, H, L, S) or undefined).
std::tuple<torch::Tensor, torch::Tensor> run_stored_plan(const CallPlan& plan,
                                                         const StoredCall& call,
                                                         const AttentionWeights& module,
                                                         const torch::Tensor& query,
                                                         const torch::Tensor& key,
                                                         const torch::Tensor& value,
                                                         KeyValueStore* store);

}  // namespace detail
}  // namespace mha
