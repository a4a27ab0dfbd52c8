// TensorParallelMultiheadAttention::forward: the local heads through mha's
// functional form, then the all-reduce of out_proj's partial products.

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <tuple>

#include "collectives.h"
#include "functional_detail.h"
#include "input_checks.h"
#include "masks.h"
#include "mha/functional.h"
#include "mha/tensor_parallel.h"

namespace mha {

using torch::Tensor;
namespace F = mha::functional;

namespace {

/// This rank's heads of a per-head (N * H, L, S) mask: (N * H / p, L, S);
/// an (L, S) mask (or none) is shared by all heads and kept.
Tensor local_heads_mask(const Tensor& mask, int64_t num_heads, const c10d::Backend& group) {
  if (!mask.defined() || mask.dim() != 3) return mask;
  const int64_t local_heads = num_heads / group.getSize();
  return mask
      .view({-1, num_heads, mask.size(1), mask.size(2)})      // (N, H, L, S)
      .narrow(1, local_heads * group.getRank(), local_heads)  // (N, H / p, L, S)
      .reshape({-1, mask.size(1), mask.size(2)});             // (N * H / p, L, S)
}

/// The local in-projection: q (L, N, E) -> (L, N, E / p), k and v (S, N, kdim
/// or vdim) -> (S, N, E / p); one GEMM for self-attention with packed weights,
/// as Python's `_in_projection_packed`.
detail::InProjection local_in_projection(const TensorParallelMultiheadAttentionImpl& m) {
  return [&m](const Tensor& q, const Tensor& k, const Tensor& v) {
    Tensor w_q = m.q_proj_weight, w_k = m.k_proj_weight, w_v = m.v_proj_weight;
    Tensor b_q, b_k, b_v;
    if (m.in_proj_weight.defined()) {
      if (q.is_same(k) && k.is_same(v)) {
        const auto proj = at::linear(q, m.in_proj_weight, m.in_proj_bias).chunk(3, -1);
        return std::make_tuple(proj[0].contiguous(), proj[1].contiguous(), proj[2].contiguous());
      }
      const auto w = m.in_proj_weight.chunk(3);
      w_q = w[0], w_k = w[1], w_v = w[2];
    }
    if (m.in_proj_bias.defined()) {
      const auto b = m.in_proj_bias.chunk(3);
      b_q = b[0], b_k = b[1], b_v = b[2];
    }
    return std::make_tuple(at::linear(q, w_q, b_q), at::linear(k, w_k, b_k),
                           at::linear(v, w_v, b_v));
  };
}

/// Megatron's "f" on each distinct input tensor, keeping which are the same.
std::tuple<Tensor, Tensor, Tensor> copy_inputs(const Tensor& q,
                                               const Tensor& k,
                                               const Tensor& v,
                                               const c10::intrusive_ptr<c10d::Backend>& group) {
  const Tensor fq = detail::copy_to_tensor_parallel(q, group);
  const Tensor fk = k.is_same(q) ? fq : detail::copy_to_tensor_parallel(k, group);
  const Tensor fv = v.is_same(k)   ? fk
                    : v.is_same(q) ? fq
                                   : detail::copy_to_tensor_parallel(v, group);
  return {fq, fk, fv};
}

}  // namespace

std::tuple<Tensor, Tensor> TensorParallelMultiheadAttentionImpl::forward(
    const Tensor& query,
    const Tensor& key,
    const Tensor& value,
    const Tensor& key_padding_mask,
    bool need_weights,
    const Tensor& attn_mask,
    bool average_attn_weights,
    bool is_causal) {
  detail::check_defined(query, key, value);
  // The whole module's checks and messages (off its fast path), then the
  // collective ones; as in Python, the causal hint may drop attn_mask unchecked.
  const bool attn_mask_dropped =
      detail::causal_hint_drops_attn_mask(is_causal, need_weights, key_padding_mask);
  detail::check_module_inputs(options, out_proj->weight, query, key, value, key_padding_mask,
                              attn_mask, /*check_attn_mask_shape=*/!attn_mask_dropped);
  validate_across_ranks();

  const bool is_batched = query.dim() == 3;
  const Tensor kpm =
      detail::canonical_key_padding_mask(key_padding_mask, attn_mask, query.scalar_type());
  const Tensor mask = F::canonical_mask(attn_mask, "attn_mask", std::nullopt, "",
                                        query.scalar_type(), /*check_other=*/false);
  // batch_first: (N, L, E) -> (L, N, E), keeping which inputs are the same tensor.
  auto [q, k, v] = copy_inputs(query, key, value, group);
  const bool transpose = options.batch_first() && is_batched;
  if (transpose) {
    const Tensor qt = q.transpose(1, 0);
    const Tensor kt = k.is_same(q) ? qt : k.transpose(1, 0);
    v = v.is_same(k) ? kt : v.is_same(q) ? qt : v.transpose(1, 0);
    q = qt, k = kt;
  }
  const int64_t local_heads = options.num_heads() / group->getSize();
  const auto func_options =
      F::MultiheadAttentionForwardFuncOptions(options.embed_dim(), local_heads, Tensor(), Tensor(),
                                              bias_k, bias_v, options.add_zero_attn(),
                                              options.dropout(), out_proj->weight, Tensor())
          .training(is_training())
          .key_padding_mask(kpm)
          .need_weights(need_weights)
          .attn_mask(local_heads_mask(mask, options.num_heads(), *group))
          .average_attn_weights(false)
          .is_causal(is_causal);
  auto [partial, weights] =
      detail::multi_head_attention_forward_with(q, k, v, func_options, local_in_projection(*this));
  Tensor out = detail::reduce_from_tensor_parallel(partial, group);  // (L, N, E), whole
  if (out_proj->bias.defined()) {
    out = out + out_proj->bias;
  }
  if (weights.defined()) {  // (N, H / p, L, S) or unbatched (H / p, L, S) -> all H heads
    const int64_t head_dim = weights.dim() - 3;
    weights = detail::gather_from_tensor_parallel(weights, head_dim, group);
    if (average_attn_weights) {
      weights = weights.mean(head_dim);  // (N, L, S) or (L, S)
    }
  }
  return {transpose ? out.transpose(1, 0) : out, weights};
}

}  // namespace mha
