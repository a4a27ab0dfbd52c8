#pragma once

// Private: Python's native fast path, in one place. Python's
// `MultiheadAttention.forward` calls `at::_native_multi_head_attention` when
// `why_not_fast_path` finds no reason against it (eval, batch_first,
// self-attention by identity, no grad, bool or no masks, even heads, packed
// weights, ...). `why_not_fast_path` mirrors that test in Python's order and
// wording; `fast_path_forward` computes such a call with one of three kernels.
// The module picks the kernel with `choose_fast_path_kernel`; the benchmark
// passes its own choice to compare them. docs/benchmarks.md has the
// measurements behind the rule.

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "mha/multihead_attention.h"

namespace mha {
namespace detail {

/// Python's `why_not_fast_path`: empty when Python's module would call
/// `at::_native_multi_head_attention`, else the first reason, in Python's
/// order and wording. Masks are judged as given: a float mask blocks the fast
/// path (as in Python), and so does any other non-bool dtype, which the slow
/// path then rejects with Python's error.
std::string why_not_fast_path(const MultiheadAttentionImpl& module,
                              const torch::Tensor& query,
                              const torch::Tensor& key,
                              const torch::Tensor& value,
                              const torch::Tensor& key_padding_mask,
                              const torch::Tensor& attn_mask);

/// Python's `MultiheadAttention.merge_masks` on canonical (float) masks, as
/// Python's fast paths (this one and `TransformerEncoderLayer`'s) call it:
/// `key_padding_mask` (N, S) alone is type 1; any `attn_mask` ((L, L) or
/// (N * H, L, L)) is expanded to (N, H, L, L), plus the padding mask, type 2.
/// `query` is (N, L, E). Returns (merged mask, mask type), both empty without masks.
std::pair<std::optional<torch::Tensor>, std::optional<int64_t>> merge_masks(
    const torch::Tensor& attn_mask,
    const torch::Tensor& key_padding_mask,
    const torch::Tensor& query,
    int64_t num_heads);

/// How a call on Python's native fast path is computed.
enum class FastPathKernel {
  /// `at::_native_multi_head_attention` called exactly as Python calls it:
  /// masks canonicalised to float and merged by `merge_masks` into (N, H, L, L).
  kPython,
  /// The same op with the masks in their smallest bool form ((L, L) type 0,
  /// (N, L) type 1, merged (N, H, L, L) type 2 only when needed): Python's bits,
  /// less memory traffic.
  kNative,
  /// One packed projection GEMM, `at::scaled_dot_product_attention` (the CPU
  /// flash kernel) and the output projection, with no (N, H, L, L) scores:
  /// equal to Python within float32 rounding. `need_weights` must be false.
  kFused,
  /// With weights: the packed projection GEMM, then head by head `baddbmm`
  /// (scores plus the mask), softmax and `bmm`, the heads' probabilities
  /// summed into the (N, L, S) average as they come, then the output
  /// projection. Averaged weights never hold (N, H, L, S): extra memory about
  /// three (N, L, S) tensors. Equal to Python within float32 rounding.
  kByHead,
};

/// Shortest sequence length at which `choose_fast_path_kernel` picks `kFused`
/// (with a mask or more than one sequence). Below it the two kernels take the
/// same time within noise (the projections dominate), so the native op keeps
/// bitwise parity there (docs/benchmarks.md, "Fused path vs native fast path").
constexpr int64_t kFusedMinLength = 128;

/// Shortest sequence length at which `choose_fast_path_kernel` picks
/// `kByHead` for calls with weights (with a mask or more than one sequence).
/// Below it the native op is as fast or faster (docs/benchmarks.md,
/// "`need_weights=true`: the head-by-head kernel and its rule").
constexpr int64_t kByHeadMinLength = 128;

/// Both thresholds for one sequence (N = 1) without masks: there the native
/// op's batched GEMMs and unmasked softmax tie with or beat both kernels up to
/// L = 512, and both win from L = 1024, also in memory (docs/benchmarks.md,
/// "`need_weights=true`: the head-by-head kernel and its rule", has the measurements).
constexpr int64_t kUnmaskedSingleMinLength = 1024;

/// The module's rule for a batch of `batch` (N) queries of length `seq_len`
/// (L), `masked` when either mask is given: from `kFusedMinLength` (without
/// weights) or `kByHeadMinLength` (with weights), or from
/// `kUnmaskedSingleMinLength` for N = 1 without masks, `kFused` or `kByHead`;
/// else `kNative`.
FastPathKernel choose_fast_path_kernel(int64_t batch,
                                       int64_t seq_len,
                                       bool need_weights,
                                       bool masked);

/// Computes a fast-path call with `kernel`. The caller has established that
/// Python's module takes its fast path here (`why_not_fast_path` is empty and
/// the module has biases) and passes the original bool masks: query (N, L, E),
/// `key_padding_mask` (N, L), `attn_mask` (L, L) or (N * H, L, L).
/// Returns (output (N, L, E), weights or undefined). Fully masked rows give
/// NaN, as the native op does. With `is_causal` and no key padding mask the
/// fused kernel trusts `attn_mask` to be the causal mask.
std::tuple<torch::Tensor, torch::Tensor> fast_path_forward(FastPathKernel kernel,
                                                           const MultiheadAttentionImpl& module,
                                                           const torch::Tensor& query,
                                                           const torch::Tensor& key_padding_mask,
                                                           bool need_weights,
                                                           const torch::Tensor& attn_mask,
                                                           bool average_attn_weights,
                                                           bool is_causal);

}  // namespace detail
}  // namespace mha
