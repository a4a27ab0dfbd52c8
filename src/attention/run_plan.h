#pragma once

// Private: the module's attention, given its plan: the fast-path kernels, or
// Python's functional path with the module's weights. The module's `forward`
// calls it after its checks, or without them when the layer calling it has
// validated the inputs (`ValidatedScope`).

#include <torch/types.h>

#include <tuple>

#include "attention/attention_call.h"
#include "attention/attention_weights.h"
#include "attention/call_plan.h"

namespace mha {

namespace detail {

/// Batch-first q, k, v (N, L, E) -> sequence-first (L, N, E) views, keeping
/// which of them are the same tensor (Python's fast-path and projection tests).
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> sequence_first(const torch::Tensor& query,
                                                                       const torch::Tensor& key,
                                                                       const torch::Tensor& value);

/// Computes `call` on `module` as `plan` says; the inputs are validated.
/// Returns (output shaped as query, weights or undefined).
std::tuple<torch::Tensor, torch::Tensor> run_plan(const CallPlan& plan,
                                                  const AttentionWeights& module,
                                                  const AttentionCall& call);

/// `plan_call` then `run_plan`: the module's forward for validated inputs.
std::tuple<torch::Tensor, torch::Tensor> attend(const AttentionWeights& module,
                                                const AttentionCall& call);

}  // namespace detail
}  // namespace mha
