#pragma once

// Private: the input projection of an attention call, one type for every form
// of its weights: Python's packed `in_proj_weight` (3E', E), separate
// `q_proj_weight`/`k_proj_weight`/`v_proj_weight` (kdim/vdim), and a
// tensor-parallel shard of either (E' = this rank's heads' rows), and the
// converted forms of either (int8 or prepacked, linear/weight_form.h). Every
// attention path (Python's functional steps, the fast-path kernels, the cached
// and paged calls, tensor parallelism) projects through it.

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <tuple>

#include "linear/int8_linear.h"
#include "linear/weight_form.h"

namespace mha {
namespace detail {

/// The weights and bias of an input projection, and the GEMMs on them.
class Projector {
 public:
  /// The q, k and v rows of the weights and bias (views; biases may be
  /// undefined), or of their converted forms (rows of the packed weight's
  /// form, or each separate weight's).
  struct Parts {
    torch::Tensor weight[3];
    torch::Tensor bias[3];
    std::shared_ptr<const WeightForm> form[3];
    int64_t rows = 0;                  // E', each part's
    int64_t first_row[3] = {0, 0, 0};  // of each part in its form
    torch::Tensor kv_bias;             // packed form: the bias of k and v, (2E')
    /// The query's projection: x (..., E) -> (..., E'), on its converted
    /// form or `at::linear` (`linear_rows`).
    torch::Tensor query(const torch::Tensor& x) const { return part(0, x); }
    /// The key's projection: x (..., kdim) -> (..., E'), as `query`.
    torch::Tensor key(const torch::Tensor& x) const { return part(1, x); }
    /// The value's projection: x (..., vdim) -> (..., E'), as `query`.
    torch::Tensor value(const torch::Tensor& x) const { return part(2, x); }
    /// Key and value of one input (key is value): x (..., E) -> 2 x (..., E'),
    /// each contiguous; one GEMM when the weight is a packed form.
    std::tuple<torch::Tensor, torch::Tensor> key_value(const torch::Tensor& x) const;

   private:
    /// Part `i` (0 q, 1 k, 2 v): x (..., features) -> (..., E').
    torch::Tensor part(int64_t i, const torch::Tensor& x) const;
  };

  /// Packed weights (3E', E) with an optional bias (3E'). `part_rows` is E'
  /// (default: a third of the weight's rows); `F.multi_head_attention_forward`
  /// passes Python's E, the query's feature size, so that a weight of another
  /// size fails where Python's does.
  static Projector packed(torch::Tensor in_proj_weight,
                          torch::Tensor in_proj_bias,
                          std::optional<int64_t> part_rows = std::nullopt);
  /// Separate weights (E', E), (E', kdim), (E', vdim) with an optional packed bias (3E').
  static Projector separate(torch::Tensor q_proj_weight,
                            torch::Tensor k_proj_weight,
                            torch::Tensor v_proj_weight,
                            torch::Tensor in_proj_bias);
  /// Converted weights (`mha::quantize_dynamic`, `mha::prepack`): packed
  /// (3E', E) in blocks (`k` and `v` null), or separate q, k, v weights.
  static Projector converted(std::shared_ptr<const WeightForm> q_or_packed,
                             std::shared_ptr<const WeightForm> k,
                             std::shared_ptr<const WeightForm> v,
                             torch::Tensor in_proj_bias);
  /// A module's own form (a `MultiheadAttention`'s, its `AttentionWeights`
  /// view, or a tensor-parallel shard's): packed when it has `in_proj_weight` (kdim == vdim ==
  /// embed_dim), converted when `mha::quantize_dynamic` or `mha::prepack` converted it.
  template <typename Module>
  static Projector of(const Module& m) {
    if (is_placeholder(m.in_proj_weight)) {
      return converted(weight_form(m, "in_proj_weight"), nullptr, nullptr, m.in_proj_bias);
    }
    if (is_placeholder(m.q_proj_weight)) {
      return converted(weight_form(m, "q_proj_weight"), weight_form(m, "k_proj_weight"),
                       weight_form(m, "v_proj_weight"), m.in_proj_bias);
    }
    return m.in_proj_weight.defined()
               ? packed(m.in_proj_weight, m.in_proj_bias)
               : separate(m.q_proj_weight, m.k_proj_weight, m.v_proj_weight, m.in_proj_bias);
  }

  /// The one output projection of mha's kernels (the fast paths, the cached
  /// and paged calls): x (..., E') -> (..., E) through `m.out_proj`, on its
  /// int8 or prepacked form when converted (`linear_int8_or_packed`).
  template <typename Module>
  static torch::Tensor output(const Module& m, const torch::Tensor& x) {
    return linear_int8_or_packed(*m.out_proj, x);
  }

  /// The weight that gives a module's parameters' dtype and device (packed, or
  /// the query's), without building a projector.
  template <typename Module>
  static const torch::Tensor& first_weight(const Module& m) {
    return m.in_proj_weight.defined() ? m.in_proj_weight : m.q_proj_weight;
  }
  /// Whether the weights are packed (one GEMM, or one form's blocks, can
  /// project self-attention).
  bool is_packed() const { return packed_weight_.defined() || form_packed(); }

  /// The one projection entry of mha's kernels (the module's fast paths, the
  /// cached and paged calls): q (..., E) -> (..., E'); k (..., kdim) and v
  /// (..., vdim) -> (..., E') each, or undefined when `key` is (a static
  /// cache that holds its memory). Self-attention (q is k is v) on packed
  /// weights is one GEMM (`fused_qkv`, three views of its output); key is
  /// value, `Parts::key_value`; else one GEMM per input. On the converted
  /// forms when converted, never Python's steps (`python`).
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> project(const torch::Tensor& query,
                                                                  const torch::Tensor& key,
                                                                  const torch::Tensor& value) const;
  /// Self-attention in one GEMM: x (..., E) -> (..., 3E'), [q; k; v] along
  /// the last dimension (`linear_rows`). Packed weights only.
  torch::Tensor fused_qkv(const torch::Tensor& x) const;
  /// The q, k, v parts, for separate GEMMs: Python's `chunk(3)` of packed
  /// weights and of the bias, made when asked for (self-attention needs none).
  Parts parts() const;

  /// Python's `_in_projection_packed` (one GEMM when q, k and v are one
  /// tensor, two when k is v, else three; each result contiguous) or, for
  /// separate weights, `_in_projection` (the caller checks the weights' shapes);
  /// `at::linear`, Python's GEMMs; on converted weights their forms' GEMMs,
  /// Python's bits again with Python's kernels on. Sequence-first
  /// q (L, N, E), k (S, N, kdim), v (S, N, vdim) -> (L, N, E'), (S, N, E') x2.
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> python(const torch::Tensor& q,
                                                                 const torch::Tensor& k,
                                                                 const torch::Tensor& v) const;

 private:
  Projector() = default;
  /// Python's two GEMMs when key is value: q, then [k; v] in one.
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> python_shared_kv(
      const torch::Tensor& q, const torch::Tensor& kv) const;
  /// The same projection on float weights: the prepacked forms' values.
  Projector float_projector() const;
  bool form_packed() const { return forms_[0] != nullptr && forms_[1] == nullptr; }

  int64_t part_rows_ = 0;                       // E'
  torch::Tensor packed_weight_;                 // (3E', E), or undefined
  torch::Tensor separate_[3];                   // (E', E), (E', kdim), (E', vdim), or undefined
  torch::Tensor packed_bias_;                   // (3E'), or undefined
  std::shared_ptr<const WeightForm> forms_[3];  // packed: [0] only; separate: all
};

}  // namespace detail
}  // namespace mha
