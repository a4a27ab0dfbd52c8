#include "attention/projector.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "linear/packed_linear.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

/// (..., parts * E') -> (parts, ..., E'), each part contiguous: Python's
/// `unflatten(-1, (parts, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()`.
Tensor split_parts(const Tensor& projected, int64_t parts, int64_t part_rows) {
  return projected.unflatten(-1, {parts, part_rows})
      .unsqueeze(0)
      .transpose(0, -2)
      .squeeze(-2)
      .contiguous();
}

}  // namespace

Projector Projector::packed(Tensor in_proj_weight,
                            Tensor in_proj_bias,
                            std::optional<int64_t> part_rows) {
  Projector p;
  p.part_rows_ = part_rows.value_or(in_proj_weight.size(0) / 3);
  p.packed_weight_ = std::move(in_proj_weight);
  p.packed_bias_ = std::move(in_proj_bias);
  return p;
}

Projector Projector::separate(Tensor q_proj_weight,
                              Tensor k_proj_weight,
                              Tensor v_proj_weight,
                              Tensor in_proj_bias) {
  Projector p;
  p.part_rows_ = q_proj_weight.size(0);
  p.separate_[0] = std::move(q_proj_weight);
  p.separate_[1] = std::move(k_proj_weight);
  p.separate_[2] = std::move(v_proj_weight);
  p.packed_bias_ = std::move(in_proj_bias);
  return p;
}

Tensor Projector::Parts::linear(int64_t i, const Tensor& x) const {
  return packed_linear(x, weight[i], bias[i]);
}

Projector::Parts Projector::parts() const {
  Parts p;
  if (is_packed()) {
    const auto w = packed_weight_.chunk(3);  // (3E', E) -> 3 x (E', E)
    for (int64_t i = 0; i < 3; ++i) p.weight[i] = w[i];
  } else {
    for (int64_t i = 0; i < 3; ++i) p.weight[i] = separate_[i];
  }
  if (packed_bias_.defined()) {
    const auto b = packed_bias_.chunk(3);  // (3E') -> 3 x (E')
    for (int64_t i = 0; i < 3; ++i) p.bias[i] = b[i];
  }
  return p;
}

Tensor Projector::self(const Tensor& x) const {
  TORCH_INTERNAL_ASSERT(is_packed(), "one-GEMM self-attention projection needs packed weights");
  return packed_linear(x, packed_weight_, packed_bias_);  // (..., E) -> (..., 3E')
}

std::tuple<Tensor, Tensor, Tensor> Projector::python_shared_kv(const Tensor& q,
                                                               const Tensor& kv) const {
  // Python's `w.split([E, E * 2])` and `b.split([E, E * 2])`: q's rows and
  // [k; v]'s from one split, as Python's autograd graph has them.
  const auto w = packed_weight_.split_with_sizes({part_rows_, 2 * part_rows_});
  Tensor b_q, b_kv;
  if (packed_bias_.defined()) {
    const auto b = packed_bias_.split_with_sizes({part_rows_, 2 * part_rows_});
    b_q = b[0];
    b_kv = b[1];
  }
  const Tensor kv_proj = split_parts(at::linear(kv, w[1], b_kv), 2, part_rows_);  // (2, S, N, E')
  return {at::linear(q, w[0], b_q), kv_proj[0], kv_proj[1]};
}

std::tuple<Tensor, Tensor, Tensor> Projector::python(const Tensor& q,
                                                     const Tensor& k,
                                                     const Tensor& v) const {
  if (is_packed() && k.is_same(v)) {
    if (q.is_same(k)) {
      const Tensor proj =
          split_parts(at::linear(q, packed_weight_, packed_bias_), 3, part_rows_);  // (3, L, N, E')
      return {proj[0], proj[1], proj[2]};
    }
    return python_shared_kv(q, k);
  }
  const Parts p = parts();
  return {at::linear(q, p.weight[0], p.bias[0]), at::linear(k, p.weight[1], p.bias[1]),
          at::linear(v, p.weight[2], p.bias[2])};
}

}  // namespace detail
}  // namespace mha
