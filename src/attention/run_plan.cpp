#include "attention/run_plan.h"

#include <c10/util/Exception.h>

#include "attention/fast_kernels.h"
#include "attention/functional_steps.h"
#include "attention/masks.h"
#include "attention/projector.h"
#include "attention/sequence_first_kernel.h"
#include "linear/int8_linear.h"
#include "mha/functional_options.h"

namespace mha {
namespace detail {

using torch::Tensor;
namespace F = mha::functional;

namespace {

/// Python's `MultiheadAttention.forward` off its fast path: both masks become
/// additive floats of the query's dtype (Python's order: other dtypes are
/// rejected here, mismatched types warn), then `F.multi_head_attention_forward`
/// in the sequence-first layout with the module's weights.
std::tuple<Tensor, Tensor> functional_path(const AttentionWeights& m,
                                           const AttentionCall& c,
                                           const std::string& why_not_fast_path) {
  const auto dtype = c.query.scalar_type();
  const Tensor kpm = canonical_key_padding_mask(c.key_padding_mask, c.attn_mask, dtype);
  const Tensor mask = canonical_attn_mask(c.attn_mask, dtype);
  TORCH_CHECK(
      !(c.query.is_nested() || c.key.is_nested() || c.value.is_nested()),
      "MultiheadAttention does not support NestedTensor outside of its fast path. The fast path "
      "was not hit because ",
      why_not_fast_path);

  const bool transpose = m.options.batch_first() && c.query.dim() == 3;
  const auto [q, k, v] = transpose ? sequence_first(c.query, c.key, c.value)
                                   : std::make_tuple(c.query, c.key, c.value);
  const auto& o = m.options;
  const auto func_options =
      F::MultiheadAttentionForwardFuncOptions(o.embed_dim(), o.num_heads(), m.in_proj_weight,
                                              m.in_proj_bias, m.bias_k, m.bias_v, o.add_zero_attn(),
                                              o.dropout(), m.out_proj->weight, m.out_proj->bias)
          .training(m.is_training())
          .key_padding_mask(kpm)
          .need_weights(c.need_weights)
          .attn_mask(mask)
          .average_attn_weights(c.average_attn_weights)
          .is_causal(c.is_causal);
  // (L, N, E): Python's checks of the weights hold for the module's own.
  auto [out, weights] = multi_head_attention_forward(q, k, v, func_options, Projector::of(m),
                                                     linear_form(*m.out_proj).get());
  return {transpose ? out.transpose(1, 0) : out, weights};  // (L, N, E) -> (N, L, E)
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> sequence_first(const Tensor& query,
                                                  const Tensor& key,
                                                  const Tensor& value) {
  const Tensor q = query.transpose(1, 0);
  const Tensor k = key.is_same(query) ? q : key.transpose(1, 0);
  const Tensor v = value.is_same(key) ? k : value.is_same(query) ? q : value.transpose(1, 0);
  return {q, k, v};
}

std::tuple<Tensor, Tensor> run_plan(const CallPlan& plan,
                                    const AttentionWeights& module,
                                    const AttentionCall& call) {
  if (plan.kernel == AttentionKernel::kFunctional) {
    return functional_path(module, call, plan.why_not_fast_path);
  }
  if (plan.kernel == AttentionKernel::kSequenceFirst) {
    return {sequence_first_attention(module, call), Tensor()};
  }
  return fast_path_forward(plan.kernel, module, call);
}

std::tuple<Tensor, Tensor> attend(const AttentionWeights& module, const AttentionCall& call) {
  return run_plan(plan_call(module, call), module, call);
}

}  // namespace detail
}  // namespace mha
