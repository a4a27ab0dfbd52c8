#include "attention/cached_attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <optional>

#include "attention/paged_decode/paged_decode.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

/// Whether the decode kernel takes q (N, H, L, hd) over keys, values: one
/// query per sequence, on the CPU, float32 or bfloat16, rows contiguous.
bool decode_kernel_takes(const Tensor& q, const Tensor& keys, const Tensor& values) {
  return q.size(2) == 1 && keys.size(2) > 0 && decode_kernel_reads(q) &&
         keys.scalar_type() == q.scalar_type() && values.scalar_type() == q.scalar_type() &&
         q.stride(3) == 1 && keys.stride(3) == 1 && values.stride(3) == 1;
}

}  // namespace

std::tuple<Tensor, Tensor> attend_over_keys(const Tensor& q,
                                            const Tensor& keys,
                                            const Tensor& values,
                                            const Tensor& mask,
                                            bool need_weights) {
  if (!need_weights && !mask.defined() && decode_kernel_takes(q, keys, values)) {
    // One query per sequence: the decode kernel over the buffers in place.
    const Tensor out = paged_decode_attention(dense_blocks(q.squeeze(2), keys, values));
    return {out.unsqueeze(2), Tensor()};  // (N, H, hd) -> (N, H, 1, hd)
  }
  if (!need_weights) {
    const auto sdpa_mask = mask.defined() ? std::optional<Tensor>(mask) : std::nullopt;
    return {at::scaled_dot_product_attention(q, keys, values, sdpa_mask), Tensor()};
  }
  const Tensor q_scaled = q * std::sqrt(1.0 / static_cast<double>(q.size(-1)));
  Tensor weights = at::matmul(q_scaled, keys.transpose(-2, -1));  // (N, H, L, S)
  if (mask.defined()) {
    weights.add_(mask);
  }
  weights = at::softmax(weights, /*dim=*/-1);
  return {at::matmul(weights, values), weights};
}

}  // namespace detail
}  // namespace mha
