#include "attention/cached_attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <optional>

namespace mha {
namespace detail {

using torch::Tensor;

std::tuple<Tensor, Tensor> attend_over_keys(const Tensor& q,
                                            const Tensor& keys,
                                            const Tensor& values,
                                            const Tensor& mask,
                                            bool need_weights) {
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
