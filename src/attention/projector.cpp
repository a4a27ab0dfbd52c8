#include "attention/projector.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "linear/packed_linear.h"
#include "mha/kernel_switches.h"

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

Projector Projector::converted(std::shared_ptr<const WeightForm> q_or_packed,
                               std::shared_ptr<const WeightForm> k,
                               std::shared_ptr<const WeightForm> v,
                               Tensor in_proj_bias) {
  TORCH_INTERNAL_ASSERT(q_or_packed != nullptr && (k == nullptr) == (v == nullptr),
                        "a converted projection needs its converted weights");
  Projector p;
  p.part_rows_ = k ? q_or_packed->out_features() : q_or_packed->out_features() / 3;
  p.forms_[0] = std::move(q_or_packed);
  p.forms_[1] = std::move(k);
  p.forms_[2] = std::move(v);
  p.packed_bias_ = std::move(in_proj_bias);
  return p;
}

Tensor Projector::Parts::part(int64_t i, const Tensor& x) const {
  if (!form[i]) return linear_rows(x, weight[i], bias[i], nullptr);
  return in_row_blocks(x, [&](const Tensor& rows_of_x) {
    return form[i]->forward_rows(first_row[i], rows, rows_of_x, bias[i]);
  });
}

std::tuple<Tensor, Tensor> Projector::Parts::key_value(const Tensor& x) const {
  if (form[1] && form[1] == form[2]) {
    const auto kv = in_row_blocks(x, [&](const Tensor& rows_of_x) {
                      return form[1]->forward_rows(first_row[1], 2 * rows, rows_of_x, kv_bias);
                    }).split(rows, /*dim=*/-1);  // (..., 2E') -> 2 x (..., E')
    return {kv[0].contiguous(), kv[1].contiguous()};
  }
  return {key(x), value(x)};
}

Projector::Parts Projector::parts() const {
  Parts p;
  p.rows = part_rows_;
  for (int64_t i = 0; i < 3; ++i) {
    p.form[i] = form_packed() ? forms_[0] : forms_[i];
    p.first_row[i] = form_packed() ? i * part_rows_ : 0;
  }
  if (packed_weight_.defined()) {
    const auto w = packed_weight_.chunk(3);  // (3E', E) -> 3 x (E', E)
    for (int64_t i = 0; i < 3; ++i) p.weight[i] = w[i];
  } else {
    for (int64_t i = 0; i < 3; ++i) p.weight[i] = separate_[i];
  }
  if (packed_bias_.defined()) {
    const auto b = packed_bias_.chunk(3);  // (3E') -> 3 x (E')
    for (int64_t i = 0; i < 3; ++i) p.bias[i] = b[i];
    p.kv_bias = packed_bias_.narrow(0, part_rows_, 2 * part_rows_);  // (2E')
  }
  return p;
}

std::tuple<Tensor, Tensor, Tensor> Projector::project(const Tensor& query,
                                                      const Tensor& key,
                                                      const Tensor& value) const {
  if (is_packed() && query.is_same(key) && key.is_same(value)) {
    const auto qkv = fused_qkv(query).chunk(3, /*dim=*/-1);  // (..., 3E') -> 3 x (..., E')
    return {qkv[0], qkv[1], qkv[2]};
  }
  const Parts p = parts();
  if (!key.defined()) return {p.query(query), Tensor(), Tensor()};
  if (key.is_same(value)) {
    const auto [k, v] = p.key_value(key);
    return {p.query(query), k, v};
  }
  return {p.query(query), p.key(key), p.value(value)};
}

Tensor Projector::fused_qkv(const Tensor& x) const {
  TORCH_INTERNAL_ASSERT(is_packed(), "one-GEMM self-attention projection needs packed weights");
  // (..., E) -> (..., 3E')
  return linear_rows(x, packed_weight_, packed_bias_, form_packed() ? forms_[0].get() : nullptr);
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

Projector Projector::float_projector() const {
  if (form_packed()) return packed(*forms_[0]->float_weight(), packed_bias_, part_rows_);
  return separate(*forms_[0]->float_weight(), *forms_[1]->float_weight(),
                  *forms_[2]->float_weight(), packed_bias_);
}

std::tuple<Tensor, Tensor, Tensor> Projector::python(const Tensor& q,
                                                     const Tensor& k,
                                                     const Tensor& v) const {
  if (forms_[0] && python_kernels_enabled() && forms_[0]->float_weight()) {
    return float_projector().python(q, k, v);  // Python's bits on the float values
  }
  if (forms_[0]) {
    // int8: Python's GEMMs on the same rows give the same values in any split
    // (per-row scales, per-element epilogue), so each part is its own GEMM;
    // prepacked: within float32 rounding of Python's, as mha's kernels are.
    if (form_packed() && q.is_same(k) && k.is_same(v)) {
      const Tensor proj = split_parts(fused_qkv(q), 3, part_rows_);  // (3, L, N, E')
      return {proj[0], proj[1], proj[2]};
    }
    const Parts p = parts();
    if (k.is_same(v)) {
      const auto [k_proj, v_proj] = p.key_value(k);
      return {p.query(q), k_proj, v_proj};
    }
    return {p.query(q), p.key(k), p.value(v)};
  }
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
