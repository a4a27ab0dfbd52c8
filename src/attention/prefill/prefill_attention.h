#pragma once

// Private: mha's self-attention without a mask, at any length, for modules
// whose projections `mha::prepack` or `mha::quantize_dynamic` converted
// (their results are within float32 rounding of Python's anyway; float modules
// keep ATen's SDPA and Python's bits). ATen's CPU flash attention multiplies
// each block with a BLAS call (MKL's sgemm on the Linux wheel); here the
// kernel lays out a head's keys and values in panels (no ATen op: it pays from
// one token on), the scores and the weighted sum run in register tiles as the
// panel GEMM's (6 query rows by 16 or 32 keys or features), the softmax
// between them in one pass over each row's scores held in L1/L2, and the
// output is written in the layout the output projection reads, (L, N, H, hd)
// or (N, L, H, hd), with no copy. Compiled once per CPU capability
// (prefill_attention_<capability>.cpp, from prefill_attention_kernel.h); the
// best one this CPU runs is chosen at run time.

#include <torch/types.h>

#include <cstdint>

#include "attention/prefill/prefill_args.h"
#include "common/cpu_capability.h"

namespace mha {
namespace detail {

/// Whether the module kernels call `prefill_attention` for q (N, H, L, hd), k
/// and v (N, H, S, hd): float32 CPU tensors, each with a contiguous last
/// dimension, hd a multiple of 32, and at least one key. It pays at every
/// length: the kernels lay out each head's keys and values themselves, with no
/// ATen op (a prepacked MultiheadAttention(512, 8) call took 0.90-0.92x the
/// time of SDPA's at 1 token, 0.93-0.98x at 16, 0.95-0.97x at 128; AVX2 EPYC).
bool prefill_attention_takes(const torch::Tensor& q,
                             const torch::Tensor& k,
                             const torch::Tensor& v);

/// softmax(q k^T / sqrt(hd)) v: q (N, H, L, hd), k and v (N, H, S, hd) with
/// any strides but a contiguous last dimension, written into `out` (N, H, L,
/// hd), a view with any strides but a contiguous last dimension (e.g. of an
/// (L, N, H, hd) tensor). Within float32 rounding of
/// `at::scaled_dot_product_attention` (exp as ATen's flash attention computes
/// it, `exp_u20`); each row's sum in one fixed order, whatever the thread count.
void prefill_attention(const torch::Tensor& q,
                       const torch::Tensor& k,
                       const torch::Tensor& v,
                       torch::Tensor& out);
/// The same with the kernel compiled for `capability` (tests compare them);
/// throws unless this CPU runs it.
void prefill_attention(const torch::Tensor& q,
                       const torch::Tensor& k,
                       const torch::Tensor& v,
                       torch::Tensor& out,
                       CpuCapability capability);

/// `prefill_attention` written as the rows an output projection reads: (L, N,
/// H * hd) when `sequence_first`, else (N, L, H * hd), contiguous.
torch::Tensor prefill_attention_rows(const torch::Tensor& q,
                                     const torch::Tensor& k,
                                     const torch::Tensor& v,
                                     bool sequence_first);

}  // namespace detail
}  // namespace mha
