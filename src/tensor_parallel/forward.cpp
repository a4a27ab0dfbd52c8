// TensorParallelMultiheadAttention::forward: the local heads through mha's
// functional form, then the all-reduce of out_proj's partial products.

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <tuple>

#include "attention/attention_call.h"
#include "attention/call_plan.h"
#include "attention/functional_steps.h"
#include "attention/input_checks.h"
#include "attention/masks.h"
#include "attention/projector.h"
#include "attention/run_plan.h"
#include "mha/functional.h"
#include "mha/tensor_parallel.h"
#include "tensor_parallel/collectives.h"

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

std::tuple<Tensor, Tensor> TensorParallelMultiheadAttentionImpl::forward_call(
    const detail::AttentionCall& call) {
  detail::check_defined(call.query, call.key, call.value);
  // The whole module's checks and messages (off its fast path), then the
  // collective ones; as in Python, the causal hint may drop attn_mask unchecked.
  detail::check_module_inputs(options, out_proj->weight, call,
                              /*check_attn_mask_shape=*/!detail::causal_hint_drops_attn_mask(call));
  validate_across_ranks();

  const auto dtype = call.query.scalar_type();
  const Tensor kpm =
      detail::canonical_key_padding_mask(call.key_padding_mask, call.attn_mask, dtype);
  const Tensor mask = detail::canonical_attn_mask(call.attn_mask, dtype);
  auto [q, k, v] = copy_inputs(call.query, call.key, call.value, group);
  const bool transpose = options.batch_first() && call.query.dim() == 3;
  if (transpose) {
    std::tie(q, k, v) = detail::sequence_first(q, k, v);  // (N, L, E) -> (L, N, E)
  }
  const int64_t local_heads = options.num_heads() / group->getSize();
  const auto func_options =
      F::MultiheadAttentionForwardFuncOptions(options.embed_dim(), local_heads, Tensor(), Tensor(),
                                              bias_k, bias_v, options.add_zero_attn(),
                                              options.dropout(), out_proj->weight, Tensor())
          .training(is_training())
          .key_padding_mask(kpm)
          .need_weights(call.need_weights)
          .attn_mask(local_heads_mask(mask, options.num_heads(), *group))
          .average_attn_weights(false)
          .is_causal(call.is_causal);
  auto [partial, weights] =  // (L, N, E) partial sums of this rank's heads
      detail::multi_head_attention_forward(q, k, v, func_options, detail::Projector::of(*this),
                                           nullptr);
  Tensor out = detail::reduce_from_tensor_parallel(partial, group);  // (L, N, E), whole
  if (out_proj->bias.defined()) {
    out = out + out_proj->bias;
  }
  if (weights.defined()) {  // (N, H / p, L, S) or unbatched (H / p, L, S) -> all H heads
    const int64_t head_dim = weights.dim() - 3;
    weights = detail::gather_from_tensor_parallel(weights, head_dim, group);
    if (call.average_attn_weights) {
      weights = weights.mean(head_dim);  // (N, L, S) or (L, S)
    }
  }
  return {transpose ? out.transpose(1, 0) : out, weights};
}

}  // namespace mha
