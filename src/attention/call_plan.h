#pragma once

// Private: the plan of one `MultiheadAttention` call, made once before any
// work (in the spirit of ATen's `sdp_params`): whether Python's module would
// take its native fast path (Python's conditions, in Python's order and
// wording), which kernel computes the call, and whether Python's functional
// path drops `attn_mask` for the causal hint. The kernel rule's thresholds
// are measured: docs/benchmarks.md has the numbers behind them.

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "attention/attention_call.h"
#include "attention/attention_weights.h"

namespace mha {

namespace detail {

/// How a call is computed.
enum class AttentionKernel {
  /// Python's `F.multi_head_attention_forward`, step for step: Python's bits
  /// wherever Python's module does not take its fast path.
  kFunctional,
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
  /// A sequence-first (L, N, E) self-attention call without weights that
  /// Python computes with its functional steps only because the module is not
  /// `batch_first` (`takes_sequence_first_kernel`): the steps' GEMMs and SDPA
  /// on the same layouts, without their copies (`sequence_first_attention`).
  /// Python's bits; on prepacked weights, mha's GEMMs (within float32 rounding).
  kSequenceFirst,
  /// A cached or paged call (a key/value source's keys): one query per
  /// sequence, no mask, no weights, on the CPU in float32 or bfloat16 with
  /// rows contiguous: the paged decode kernel, reading the source's blocks or
  /// buffers in place (`paged_decode/`).
  kDecode,
  /// A cached or paged call without weights: `at::scaled_dot_product_attention`
  /// over the source's keys and values, with the call's additive mask.
  kOverKeys,
  /// A cached call with weights: softmax(q k^T / sqrt(hd) + mask) v, the
  /// weights (N, H, L, S) kept.
  kOverKeysWithWeights,
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

/// The module's rule for a fast-path call on a batch of `batch` (N) queries
/// of length `seq_len` (L), `masked` when either mask is given: `kPython`
/// while `python_kernels_enabled()`; when `prepacked` (the projections are
/// prepacked by `mha::prepack`: the native op takes float weights) `kFused`,
/// or `kByHead` with weights; else from `kFusedMinLength` (without weights) or
/// `kByHeadMinLength` (with weights), or from `kUnmaskedSingleMinLength` for
/// N = 1 without masks, `kFused` or `kByHead`; else `kNative`.
AttentionKernel choose_fast_path_kernel(
    int64_t batch, int64_t seq_len, bool need_weights, bool masked, bool prepacked);

/// Whether `module`'s `in_proj_weight` is prepacked (`mha::prepack`).
bool has_prepacked_projections(const AttentionWeights& module);

/// Whether a module kernel's unmasked, non-causal attention of q (N, H, L, hd)
/// over k and v (N, H, S, hd) runs mha's prefill kernel: a prepacked module
/// (within float32 rounding of Python anyway; float modules keep SDPA and
/// Python's bits) and operands that `prefill_attention_takes`.
bool takes_prefill_attention(const AttentionWeights& module,
                             const torch::Tensor& q,
                             const torch::Tensor& k,
                             const torch::Tensor& v);

/// What one call will do, decided before any work.
struct CallPlan {
  /// Python's `why_not_fast_path`: empty when Python's module calls its native op.
  std::string why_not_fast_path;
  /// The kernel that computes the call (a paged or packed call: see `sequence_kernels`).
  AttentionKernel kernel = AttentionKernel::kFunctional;
  /// A paged or packed call: each sequence's kernel, in call order.
  std::vector<AttentionKernel> sequence_kernels;
  /// Python's functional path drops `attn_mask` before checking its shape:
  /// `is_causal`, no weights and no key padding mask (off the fast path).
  bool attn_mask_dropped = false;
};

/// Python's `why_not_fast_path` for `module` and `call`: empty when Python's
/// module would call `at::_native_multi_head_attention`, else the first
/// reason, in Python's order and wording. Masks are judged as given: a float
/// mask blocks the fast path (as in Python), and so does any other non-bool
/// dtype, which the functional path then rejects with Python's error.
std::string why_not_fast_path(const AttentionWeights& module, const AttentionCall& call);

/// Whether `call` takes `kSequenceFirst`: the module is sequence-first, the
/// call asks no weights, mha's kernels are on, the module has biases, the
/// query is not empty, `is_causal` comes with its `attn_mask`, and every
/// other condition of
/// Python's `why_not_fast_path` holds (eval, no grad, self-attention, bool
/// masks, even heads, no `bias_k`/`bias_v`/`add_zero_attn`, kdim == vdim == E,
/// not int8).
bool takes_sequence_first_kernel(const AttentionWeights& module, const AttentionCall& call);

/// Whether Python's functional path drops `call.attn_mask` before checking its
/// shape: the causal hint wins with `is_causal`, no weights and no key padding mask.
bool causal_hint_drops_attn_mask(const AttentionCall& call);

/// The plan of `call` on `module`: the fast path where Python takes it (and
/// the module has biases, without which Python's op is not called), with the
/// kernel of `choose_fast_path_kernel`; `kSequenceFirst` where
/// `takes_sequence_first_kernel`; else `kFunctional`.
CallPlan plan_call(const AttentionWeights& module, const AttentionCall& call);

/// Where a cached, paged or packed call's keys and values are kept.
enum class KeyValueLayout {
  /// A KVCache's buffers: keys (N, H, S, hd), the queries (N, H, L, hd).
  kDense,
  /// A PagedKVCache's blocks: each sequence's new rows, its keys in blocks.
  kPaged,
  /// The call's own keys: sequences packed as rows, each over its own rows.
  kPacked,
};

/// A call over stored keys and values after its checks, as its plan and run
/// read it (in the spirit of ATen's `sdp_params`: one parameter object).
struct StoredCall {
  KeyValueLayout layout = KeyValueLayout::kDense;
  /// The projected queries' dtype and device (the checked query's).
  c10::ScalarType dtype = c10::ScalarType::Float;
  c10::Device device = c10::kCPU;
  int64_t num_heads = 1;
  /// kDense: the dtype of the keys and values it keeps.
  c10::ScalarType store_dtype = c10::ScalarType::Float;
  /// kDense: the rows' layout, (N, L, E') when true, else (L, N, E').
  bool batch_first = true;
  /// kDense: new queries per batch row (L), keys after the call with the
  /// extra rows (S), whether weights are asked (per head, (N, H, L, S)).
  int64_t query_len = 0;
  int64_t key_len = 0;
  bool need_weights = false;
  /// kDense: the additive mask over the keys, broadcastable to (N, H, L, S); undefined: none.
  torch::Tensor mask;
  /// kPaged, kPacked: sequence i's query rows are [query_offsets[i], query_offsets[i + 1]).
  const std::vector<int64_t>* query_offsets = nullptr;
  /// kPaged: self-attention, a sequence's several new queries each see the
  /// keys up to its own position (the causal mask aligned to the bottom right).
  bool causal = false;
};

/// The plan of a call over stored keys and values, every kernel chosen here:
/// kDense: `kOverKeysWithWeights` with weights, else `kDecode` where it takes
/// the call (one query per row, no mask, keys in the queries' dtype, which
/// `decode_kernel_reads`), else `kOverKeys`; kPaged and kPacked: each
/// sequence `kDecode` for one new query where `decode_kernel_reads` the dtype,
/// else `kOverKeys` (over its gathered keys, or its own rows).
CallPlan plan_stored_call(const StoredCall& call);

}  // namespace detail
}  // namespace mha
