#pragma once

// Private: the module's attention, given its plan: the fast-path kernels, or
// Python's functional path with the module's weights. The module's `forward`
// calls it after its checks, or without them when the layer calling it has
// validated the inputs (`ValidatedScope`).

#include <torch/types.h>

#include <tuple>

#include "attention/attention_call.h"
#include "attention/call_plan.h"
#include "attention/key_value_source.h"

namespace mha {

class MultiheadAttentionImpl;

namespace detail {

/// Batch-first q, k, v (N, L, E) -> sequence-first (L, N, E) views, keeping
/// which of them are the same tensor (Python's fast-path and projection tests).
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> sequence_first(const torch::Tensor& query,
                                                                       const torch::Tensor& key,
                                                                       const torch::Tensor& value);

/// Computes `call` on `module` as `plan` says; the inputs are validated.
/// Returns (output shaped as query, weights or undefined).
std::tuple<torch::Tensor, torch::Tensor> run_plan(const CallPlan& plan,
                                                  const MultiheadAttentionImpl& module,
                                                  const AttentionCall& call);

/// A cached or paged call's attention: q (N, H, L, hd) over a source's keys
/// and values (N, H, S, hd) with the additive `mask` (undefined: none), by
/// the kernel `choose_over_keys_kernel` picks (kDecode, kOverKeys or
/// kOverKeysWithWeights). `rows` (int32 (N,)): query row i attends over
/// keys and values row rows[i] (of any count of rows; the decode kernel reads
/// them in place, the others a gathered copy); undefined: row i. Returns
/// (N, H, L, hd) and the weights (N, H, L, S) or undefined.
std::tuple<torch::Tensor, torch::Tensor> attend_over_keys(const torch::Tensor& q,
                                                          const torch::Tensor& keys,
                                                          const torch::Tensor& values,
                                                          const torch::Tensor& mask,
                                                          bool need_weights,
                                                          const torch::Tensor& rows = {});

/// A cached or paged call after its checks, the one pipeline of both: the
/// projector's one entry on `query`, `key`, `value` (inputs as the module
/// takes them), `source` (stores, then attends over its keys and values),
/// the output projection. Returns (output, weights or undefined).
std::tuple<torch::Tensor, torch::Tensor> attend_through_source(const MultiheadAttentionImpl& module,
                                                               const torch::Tensor& query,
                                                               const torch::Tensor& key,
                                                               const torch::Tensor& value,
                                                               KeyValueSource& source);

/// `plan_call` then `run_plan`: the module's forward for validated inputs.
std::tuple<torch::Tensor, torch::Tensor> attend(const MultiheadAttentionImpl& module,
                                                const AttentionCall& call);

}  // namespace detail
}  // namespace mha
