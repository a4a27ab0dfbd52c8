#pragma once

// Private: the kernels of Python's native fast path (`AttentionKernel`'s
// kPython, kNative, kFused and kByHead). The module picks one with
// `plan_call`; the benchmark passes its own choice to compare them.

#include <torch/types.h>

#include <tuple>

#include "attention/attention_call.h"
#include "attention/attention_weights.h"
#include "attention/call_plan.h"

namespace mha {

namespace detail {

/// Computes a fast-path call with `kernel` (not `kFunctional` or `kSequenceFirst`). The caller
/// has established that Python's module takes its fast path here
/// (`plan_call`) and passes the original bool masks: query (N, L, E),
/// `key_padding_mask` (N, L), `attn_mask` (L, L) or (N * H, L, L).
/// Returns (output (N, L, E), weights or undefined). Fully masked rows give
/// NaN, as the native op does. With `is_causal` and no key padding mask the
/// fused kernel trusts `attn_mask` to be the causal mask.
std::tuple<torch::Tensor, torch::Tensor> fast_path_forward(AttentionKernel kernel,
                                                           const AttentionWeights& module,
                                                           const AttentionCall& call);

}  // namespace detail
}  // namespace mha
