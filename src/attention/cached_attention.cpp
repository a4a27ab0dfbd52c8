#include "attention/cached_attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <optional>

#include "attention/paged_decode/paged_decode.h"
#include "attention/small_sdpa.h"

namespace mha {
namespace detail {

using torch::Tensor;

Tensor decode_over_keys(const Tensor& q,
                        const Tensor& keys,
                        const Tensor& values,
                        const Tensor& rows) {
  const Tensor out = paged_decode_attention(dense_blocks(q.squeeze(2), keys, values, rows));
  return out.unsqueeze(2);  // (N, H, hd) -> (N, H, 1, hd)
}

Tensor sdpa_over_keys(const Tensor& q,
                      const Tensor& keys,
                      const Tensor& values,
                      const Tensor& mask) {
  const auto sdpa_mask = mask.defined() ? std::optional<Tensor>(mask) : std::nullopt;
  return sdpa(q, keys, values, sdpa_mask);
}

std::tuple<Tensor, Tensor> softmax_over_keys(const Tensor& q,
                                             const Tensor& keys,
                                             const Tensor& values,
                                             const Tensor& mask) {
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
