// Python's F.multi_head_attention_forward, step for step, so that the same ATen
// kernels run on tensors of the same layout and the numbers agree bit for bit.
// The public `mha::functional::multi_head_attention_forward` (src/functional.cpp)
// and the module's functional path (run_plan) both come here.

#include "attention/functional_steps.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "attention/input_checks.h"
#include "attention/masks.h"
#include "attention/projector.h"
#include "common/shape_format.h"

namespace mha {
namespace detail {

using functional::MultiheadAttentionForwardFuncOptions;
using torch::Tensor;

namespace {

void check_weight_shape(const Tensor& weight, std::vector<int64_t> expected, const char* what) {
  TORCH_CHECK(weight.sizes() == c10::IntArrayRef(expected),
              fmt::format("expecting {} shape of {}, but got {}", what,
                          detail::python_tuple(expected), detail::torch_size(weight.sizes())));
}

/// The shape checks of Python's `_in_projection` (separate weights, kdim/vdim).
void check_separate_weights(const Tensor& q,
                            const Tensor& k,
                            const Tensor& v,
                            const MultiheadAttentionForwardFuncOptions& o) {
  const int64_t Eq = q.size(-1), Ek = k.size(-1), Ev = v.size(-1);
  check_weight_shape(o.q_proj_weight(), {Eq, Eq}, "query weights");
  check_weight_shape(o.k_proj_weight(), {Eq, Ek}, "key weights");
  check_weight_shape(o.v_proj_weight(), {Eq, Ev}, "value weights");
  if (o.in_proj_bias().defined()) {
    const auto b = o.in_proj_bias().chunk(3);
    check_weight_shape(b[0], {Eq}, "query bias");
    check_weight_shape(b[1], {Eq}, "key bias");
    check_weight_shape(b[2], {Eq}, "value bias");
  }
}

/// Replaces `static_k`/`static_v` after checking Python's conditions.
Tensor check_static(const Tensor& t, int64_t bsz_heads, int64_t head_dim, const char* name) {
  TORCH_CHECK(t.size(0) == bsz_heads,
              fmt::format("expecting {}.size(0) of {}, but got {}", name, bsz_heads, t.size(0)));
  TORCH_CHECK(t.size(2) == head_dim,
              fmt::format("expecting {}.size(2) of {}, but got {}", name, head_dim, t.size(2)));
  return t;
}

/// The masks as Python's step after the shape check leaves them: key padding
/// canonicalised; with `is_causal`, no key padding mask and no weights, the
/// explicit mask dropped for SDPA's causal mode (before its shape is checked);
/// otherwise canonicalised, and the hint reset by a key padding mask.
struct Masks {
  Tensor key_padding_mask;  // (N, S) additive, or undefined
  Tensor attn_mask;         // (L, S) or (N * H, L, S) additive, or undefined
  bool is_causal;
};

Masks canonical_masks(const MultiheadAttentionForwardFuncOptions& o,
                      const Tensor& key_padding_mask,
                      c10::ScalarType dtype) {
  Masks m{detail::canonical_key_padding_mask(key_padding_mask, o.attn_mask(), dtype), o.attn_mask(),
          o.is_causal()};
  TORCH_CHECK(!(m.is_causal && !m.attn_mask.defined()),
              "Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
              "method `generate_square_subsequent_mask` to create this mask.");
  if (m.is_causal && !m.key_padding_mask.defined() && !o.need_weights()) {
    m.attn_mask = Tensor();  // SDPA's own causal mode replaces the explicit mask
  } else {
    m.attn_mask = detail::canonical_attn_mask(m.attn_mask, dtype);
    if (m.key_padding_mask.defined()) {
      m.is_causal = false;
    }
  }
  return m;
}

/// Python's in-projection with its checks: q (L, N, E), k and v (S, N, E).
std::tuple<Tensor, Tensor, Tensor> project_inputs(const Tensor& query,
                                                  const Tensor& key,
                                                  const Tensor& value,
                                                  const MultiheadAttentionForwardFuncOptions& o) {
  if (o.use_separate_proj_weight()) {
    TORCH_CHECK(key.sizes().slice(0, 2) == value.sizes().slice(0, 2),
                fmt::format("key's sequence and batch dims {} do not match value's {}",
                            detail::torch_size(key.sizes().slice(0, 2)),
                            detail::torch_size(value.sizes().slice(0, 2))));
  } else {
    TORCH_CHECK(key.sizes() == value.sizes(),
                fmt::format("key shape {} does not match value shape {}",
                            detail::torch_size(key.sizes()), detail::torch_size(value.sizes())));
  }
  if (!o.use_separate_proj_weight()) {
    TORCH_CHECK(o.in_proj_weight().defined(),
                "use_separate_proj_weight is False but in_proj_weight is None");
    // Python's E is the query's feature size: another weight fails where Python's does.
    return detail::Projector::packed(o.in_proj_weight(), o.in_proj_bias(), query.size(-1))
        .python(query, key, value);
  }
  TORCH_CHECK(o.q_proj_weight().defined(),
              "use_separate_proj_weight is True but q_proj_weight is None");
  TORCH_CHECK(o.k_proj_weight().defined(),
              "use_separate_proj_weight is True but k_proj_weight is None");
  TORCH_CHECK(o.v_proj_weight().defined(),
              "use_separate_proj_weight is True but v_proj_weight is None");
  check_separate_weights(query, key, value, o);
  return detail::Projector::separate(o.q_proj_weight(), o.k_proj_weight(), o.v_proj_weight(),
                                     o.in_proj_bias())
      .python(query, key, value);
}

/// Projected q, k, v with the heads folded into the batch, and the one
/// additive mask that attention adds to the scores.
struct Heads {
  Tensor q;                       // (N * H, L, hd)
  Tensor k, v;                    // (N * H, S', hd), S' with the bias and zero rows
  Tensor attn_mask;               // (1, L, S') or (N * H, L, S') additive, or undefined
  int64_t tgt_len, bsz, src_len;  // L, N, S'
};

/// Python's steps from the bias rows to the key padding merge: `bias_k`/`bias_v`
/// rows (masks padded with a 0 column), heads folded into the batch (or
/// `static_k`/`static_v`), the `add_zero_attn` row, and the key padding mask
/// (N, S') merged additively as (N * H, 1, S').
Heads fold_heads(
    Tensor q, Tensor k, Tensor v, Masks masks, const MultiheadAttentionForwardFuncOptions& o) {
  const int64_t num_heads = o.num_heads();
  const int64_t tgt_len = q.size(0), bsz = q.size(1), head_dim = q.size(2) / num_heads;
  Tensor attn_mask = masks.attn_mask, key_padding_mask = masks.key_padding_mask;
  if (attn_mask.defined()) {
    detail::check_attn_mask_shape(attn_mask, tgt_len, k.size(0), bsz * num_heads);
    if (attn_mask.dim() == 2) {
      attn_mask = attn_mask.unsqueeze(0);  // (L, S) -> (1, L, S)
    }
  }
  const Tensor& bias_k = o.bias_k();
  const Tensor& bias_v = o.bias_v();
  if (bias_k.defined() && bias_v.defined()) {
    TORCH_CHECK(!o.static_k().defined(), "bias cannot be added to static key.");
    TORCH_CHECK(!o.static_v().defined(), "bias cannot be added to static value.");
    k = at::cat({k, bias_k.repeat({1, bsz, 1})});  // (S + 1, N, E)
    v = at::cat({v, bias_v.repeat({1, bsz, 1})});
    attn_mask = detail::pad_visible_keys(attn_mask);
    key_padding_mask = detail::pad_visible_keys(key_padding_mask);
  } else {
    TORCH_CHECK(!bias_k.defined(), "bias_k is set but bias_v is None");
    TORCH_CHECK(!bias_v.defined(), "bias_v is set but bias_k is None");
  }
  q = q.view({tgt_len, bsz * num_heads, head_dim}).transpose(0, 1);  // (N * H, L, hd)
  k = o.static_k().defined() ? check_static(o.static_k(), bsz * num_heads, head_dim, "static_k")
                             : k.view({k.size(0), bsz * num_heads, head_dim}).transpose(0, 1);
  v = o.static_v().defined() ? check_static(o.static_v(), bsz * num_heads, head_dim, "static_v")
                             : v.view({v.size(0), bsz * num_heads, head_dim}).transpose(0, 1);
  if (o.add_zero_attn()) {  // a zero key/value row: (N * H, S + 1, hd)
    k = at::cat({k, at::zeros({bsz * num_heads, 1, head_dim}, k.options())}, /*dim=*/1);
    v = at::cat({v, at::zeros({bsz * num_heads, 1, head_dim}, v.options())}, /*dim=*/1);
    attn_mask = detail::pad_visible_keys(attn_mask);
    key_padding_mask = detail::pad_visible_keys(key_padding_mask);
  }
  const int64_t src_len = k.size(1);
  if (key_padding_mask.defined()) {  // (N, S) -> (N * H, 1, S), merged additively
    detail::check_key_padding_mask_shape(key_padding_mask, src_len, bsz);
    key_padding_mask = key_padding_mask.view({bsz, 1, 1, src_len})
                           .expand({-1, num_heads, -1, -1})
                           .reshape({bsz * num_heads, 1, src_len});
    attn_mask = attn_mask.defined() ? attn_mask + key_padding_mask : key_padding_mask;
  }
  return {q, k, v, attn_mask, tgt_len, bsz, src_len};
}

/// The output projection (L * N, E) -> (L * N, E): Python's `linear` on
/// `out_proj_weight`, or the converted form of the module's `out_proj`.
Tensor project_output(const Tensor& out,
                      const MultiheadAttentionForwardFuncOptions& o,
                      const detail::WeightForm* out_form) {
  return out_form ? out_form->forward(out, o.out_proj_bias())
                  : at::linear(out, o.out_proj_weight(), o.out_proj_bias());
}

/// The weights tail: weights (N * H, L, S) = softmax(q k^T / sqrt(hd) + mask),
/// dropout, bmm with v, output projection. Returns (L, N, E) and the weights
/// (N, L, S) averaged or (N, H, L, S).
std::tuple<Tensor, Tensor> attend_with_weights(const Heads& h,
                                               double dropout_p,
                                               const MultiheadAttentionForwardFuncOptions& o,
                                               const detail::WeightForm* out_form) {
  const int64_t embed_dim = h.q.size(2) * o.num_heads();
  const Tensor q_scaled = h.q * std::sqrt(1.0 / static_cast<double>(h.q.size(2)));
  // Where Python's baddbmm fails ("Input dtypes must be the same"), named.
  TORCH_CHECK_TYPE(
      !h.attn_mask.defined() || h.attn_mask.scalar_type() == q_scaled.scalar_type(),
      fmt::format("expected the attention mask (attn_mask and key_padding_mask, added) to have "
                  "the query's dtype {}, but got {}",
                  c10::toString(q_scaled.scalar_type()), c10::toString(h.attn_mask.scalar_type())));
  Tensor weights = h.attn_mask.defined() ? at::baddbmm(h.attn_mask, q_scaled, h.k.transpose(-2, -1))
                                         : at::bmm(q_scaled, h.k.transpose(-2, -1));
  weights = at::softmax(weights, /*dim=*/-1);
  if (dropout_p > 0.0) {
    weights = at::dropout(weights, dropout_p, /*train=*/true);
  }
  Tensor out = at::bmm(weights, h.v);                                 // (N * H, L, hd)
  out = out.transpose(0, 1).reshape({h.tgt_len * h.bsz, embed_dim});  // (L * N, E)
  out = project_output(out, o, out_form);
  out = out.view({h.tgt_len, h.bsz, out.size(1)});                       // (L, N, E)
  weights = weights.view({h.bsz, o.num_heads(), h.tgt_len, h.src_len});  // (N, H, L, S)
  if (o.average_attn_weights()) {
    weights = weights.mean(/*dim=*/1);  // (N, L, S)
  }
  return {out, weights};
}

/// The SDPA tail: mask (1, 1, L, S) or (N, H, L, S), q (N, H, L, hd), k and v
/// (N, H, S, hd), then the output projection. Returns (L, N, E).
Tensor attend_sdpa(const Heads& h,
                   double dropout_p,
                   bool is_causal,
                   const MultiheadAttentionForwardFuncOptions& o,
                   const detail::WeightForm* out_form) {
  const int64_t num_heads = o.num_heads(), head_dim = h.q.size(2);
  std::optional<Tensor> attn_mask;
  if (h.attn_mask.defined()) {
    attn_mask = (h.attn_mask.size(0) == 1 && h.attn_mask.dim() == 3)
                    ? h.attn_mask.unsqueeze(0)
                    : h.attn_mask.reshape({h.bsz, num_heads, -1, h.src_len});
  }
  const Tensor q = h.q.view({h.bsz, num_heads, h.tgt_len, head_dim});
  const Tensor k = h.k.view({h.bsz, num_heads, h.src_len, head_dim});
  const Tensor v = h.v.view({h.bsz, num_heads, h.src_len, head_dim});
  Tensor out = at::scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal);
  out = out.permute({2, 0, 1, 3}).reshape({h.bsz * h.tgt_len, num_heads * head_dim});  // (L * N, E)
  out = project_output(out, o, out_form);
  return out.view({h.tgt_len, h.bsz, out.size(1)});  // (L, N, E)
}

}  // namespace

std::tuple<Tensor, Tensor> multi_head_attention_forward(
    const Tensor& query_in,
    const Tensor& key_in,
    const Tensor& value_in,
    const MultiheadAttentionForwardFuncOptions& o,
    const std::optional<Projector>& projector,
    const WeightForm* out_form) {
  const int64_t num_heads = o.num_heads();
  const bool is_batched =
      mha_shape_check(query_in, key_in, value_in, o.key_padding_mask(), o.attn_mask(), num_heads);

  // Unbatched input gets a batch dimension of 1. Like Python, each unsqueeze is a
  // new tensor, so self-attention identity is not kept (three projections).
  Tensor query = query_in, key = key_in, value = value_in;
  Tensor key_padding_mask = o.key_padding_mask();
  if (!is_batched) {
    query = query_in.unsqueeze(1);
    key = key_in.unsqueeze(1);
    value = value_in.unsqueeze(1);
    if (key_padding_mask.defined()) {
      key_padding_mask = key_padding_mask.unsqueeze(0);
    }
  }
  const Masks masks = canonical_masks(o, key_padding_mask, query.scalar_type());

  const int64_t embed_dim = query.size(2);
  check_embed_dim(embed_dim, o.embed_dim_to_check());
  TORCH_CHECK(embed_dim % num_heads == 0,
              fmt::format("embed_dim {} not divisible by num_heads {}", embed_dim, num_heads));

  auto [q, k, v] =
      projector ? projector->python(query, key, value) : project_inputs(query, key, value, o);
  const Heads heads = fold_heads(q, k, v, masks, o);
  const double dropout_p = o.training() ? o.dropout_p() : 0.0;
  if (o.need_weights()) {
    auto [out, weights] = attend_with_weights(heads, dropout_p, o, out_form);
    if (!is_batched) {
      return {out.squeeze(1), weights.squeeze(0)};
    }
    return {out, weights};
  }
  const Tensor out = attend_sdpa(heads, dropout_p, masks.is_causal, o, out_form);
  return {is_batched ? out : out.squeeze(1), Tensor()};
}

}  // namespace detail
}  // namespace mha
