#pragma once

// Private: Python's native fast path, done faster. Where Python's module calls
// `at::_native_multi_head_attention` (which on CPU materialises the
// (N, H, L, L) scores) and no weights are asked for, long sequences go through
// one packed projection GEMM, `at::scaled_dot_product_attention` (the CPU
// flash kernel) and the output projection, with no copies in between: equal to
// Python within float32 rounding, not bit for bit. The other fast-path calls
// run the native op itself with lean masks: the same bits as Python. See
// docs/benchmarks.md for the measurements behind the length threshold.

#include "mha/multihead_attention.h"

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <tuple>

namespace mha {
namespace detail {

/// Shortest sequence length at which the fused path replaces the native fast
/// path. From L = 128 the fused path is measurably faster (E = 512, 1 thread:
/// 1-4% without masks, 13-17% with a mask, which the native path materialises
/// as (N, H, L, L)); below it the two are equal within noise (the projections
/// dominate), so the native path stays there and keeps bitwise parity with
/// Python. Measurements: docs/benchmarks.md, "Fused path vs native fast path".
constexpr int64_t kSdpaInferenceMinLength = 128;

/// Overrides `kSdpaInferenceMinLength` (benchmarks and tests); a value < 1
/// restores the default. Not thread-safe with concurrent forwards.
void set_sdpa_inference_min_length(int64_t min_length);

/// The threshold in effect.
int64_t sdpa_inference_min_length();

/// Turns `fast_path_forward` off: the module then calls the native op exactly
/// as Python does (merged float masks), e.g. for benchmarks of Python's memory
/// use. Not thread-safe with concurrent forwards.
void set_fast_path_forward_enabled(bool enabled);

/// Whether `fast_path_forward` is used (default true).
bool fast_path_forward_is_enabled();

/// Python's native fast path, done faster. The caller has established that
/// Python's module would call `at::_native_multi_head_attention` here (eval,
/// batch_first, self-attention by identity, no grad, bool or no masks, even
/// heads, packed weights with biases, ...; mha-semantics section 7) and passes
/// the original bool masks. Returns (output, weights or undefined):
/// - need_weights false and L >= `sdpa_inference_min_length()`: the fused
///   SDPA path (`sdpa_self_attention`), equal to Python within float32
///   rounding, not bit for bit.
/// - otherwise: the native op itself, with the masks in their smallest bool
///   form instead of Python's merged float (N, H, L, L) (`native_self_attention`):
///   the same bits as Python, less memory traffic.
std::tuple<torch::Tensor, torch::Tensor> fast_path_forward(
    const MultiheadAttentionImpl& module,
    const torch::Tensor& query,
    const torch::Tensor& key_padding_mask,
    bool need_weights,
    const torch::Tensor& attn_mask,
    bool average_attn_weights,
    bool is_causal);

}  // namespace detail
}  // namespace mha
