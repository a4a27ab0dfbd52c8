#pragma once

// Private: mha's own SDPA calls (the fast path, the sequence-first kernel, the
// cached calls) through one entry, on the calling thread when small.

#include <ATen/ATen.h>

#include <optional>

#include "common/calling_thread.h"

namespace mha {
namespace detail {

/// `at::scaled_dot_product_attention(q, k, v, mask, 0, causal)`: on the
/// calling thread alone when q, k and v hold at most kCallingThreadElements
/// elements and OpenMP's workers sleep (waking one costs more than the
/// attention); the same bits either way. q (N, H, L, hd) -> (N, H, L, hd).
inline at::Tensor sdpa(const at::Tensor& q,
                       const at::Tensor& k,
                       const at::Tensor& v,
                       const std::optional<at::Tensor>& mask,
                       bool causal = false) {
  return on_calling_thread_if_small(q.numel() + k.numel() + v.numel(), [&] {
    return at::scaled_dot_product_attention(q, k, v, mask, /*dropout_p=*/0.0, causal);
  });
}

}  // namespace detail
}  // namespace mha
