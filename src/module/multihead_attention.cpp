#include "mha/multihead_attention.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/nn/init.h>

#include <string>
#include <utility>

#include "attention/attention_call.h"
#include "attention/call_plan.h"
#include "attention/input_checks.h"
#include "attention/projector.h"
#include "attention/run_plan.h"
#include "common/validated_scope.h"
#include "linear/converted_module.h"
#include "linear/int8_linear.h"

namespace mha {

using torch::Tensor;

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions& options_)
    : detail::ConvertibleModule<MultiheadAttentionImpl>("mha::MultiheadAttention"),
      options(options_) {
  reset();
}

bool MultiheadAttentionImpl::qkv_same_embed_dim() const {
  const int64_t embed_dim = options.embed_dim();
  return options.kdim().value_or(embed_dim) == embed_dim &&
         options.vdim().value_or(embed_dim) == embed_dim;
}

void MultiheadAttentionImpl::reset() {
  options.validate();
  const int64_t embed_dim = options.embed_dim();
  const int64_t kdim = options.kdim().value_or(embed_dim);
  const int64_t vdim = options.vdim().value_or(embed_dim);

  // Registration order is Python's, so named_parameters() == state_dict() order.
  if (!qkv_same_embed_dim()) {
    q_proj_weight = register_parameter("q_proj_weight", torch::empty({embed_dim, embed_dim}));
    k_proj_weight = register_parameter("k_proj_weight", torch::empty({embed_dim, kdim}));
    v_proj_weight = register_parameter("v_proj_weight", torch::empty({embed_dim, vdim}));
    in_proj_weight = register_parameter("in_proj_weight", {}, /*requires_grad=*/false);
  } else {
    in_proj_weight = register_parameter("in_proj_weight", torch::empty({3 * embed_dim, embed_dim}));
    q_proj_weight = register_parameter("q_proj_weight", {}, /*requires_grad=*/false);
    k_proj_weight = register_parameter("k_proj_weight", {}, /*requires_grad=*/false);
    v_proj_weight = register_parameter("v_proj_weight", {}, /*requires_grad=*/false);
  }
  in_proj_bias = options.bias() ? register_parameter("in_proj_bias", torch::empty({3 * embed_dim}))
                                : register_parameter("in_proj_bias", {}, /*requires_grad=*/false);
  // Constructing the Linear draws its default init, as in Python's __init__.
  out_proj = register_module(
      "out_proj",
      torch::nn::Linear(torch::nn::LinearOptions(embed_dim, embed_dim).bias(options.bias())));
  if (options.add_bias_kv()) {
    bias_k = register_parameter("bias_k", torch::empty({1, 1, embed_dim}));
    bias_v = register_parameter("bias_v", torch::empty({1, 1, embed_dim}));
  } else {
    bias_k = register_parameter("bias_k", {}, /*requires_grad=*/false);
    bias_v = register_parameter("bias_v", {}, /*requires_grad=*/false);
  }
  reset_parameters();
}

void MultiheadAttentionImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  if (qkv_same_embed_dim()) {
    torch::nn::init::xavier_uniform_(in_proj_weight);
  } else {
    torch::nn::init::xavier_uniform_(q_proj_weight);
    torch::nn::init::xavier_uniform_(k_proj_weight);
    torch::nn::init::xavier_uniform_(v_proj_weight);
  }
  if (in_proj_bias.defined()) {
    torch::nn::init::constant_(in_proj_bias, 0.0);
    torch::nn::init::constant_(out_proj->bias, 0.0);
  }
  if (bias_k.defined()) {
    torch::nn::init::xavier_normal_(bias_k);
  }
  if (bias_v.defined()) {
    torch::nn::init::xavier_normal_(bias_v);
  }
}

template class detail::ConvertibleModule<MultiheadAttentionImpl>;

void MultiheadAttentionImpl::pretty_print(std::ostream& stream) const {
  std::string text = fmt::format("mha::MultiheadAttention(embed_dim={}, num_heads={}",
                                 options.embed_dim(), options.num_heads());
  if (options.dropout() != 0.0) text += fmt::format(", dropout={}", options.dropout());
  if (!options.bias()) text += ", bias=false";
  if (options.add_bias_kv()) text += ", add_bias_kv=true";
  if (options.add_zero_attn()) text += ", add_zero_attn=true";
  if (options.kdim()) text += fmt::format(", kdim={}", *options.kdim());
  if (options.vdim()) text += fmt::format(", vdim={}", *options.vdim());
  if (options.batch_first()) text += ", batch_first=true";
  stream << text << ")";
}

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward_call(const detail::AttentionCall& call) {
  const auto weights = detail::AttentionWeights::of(*this);
  if (detail::ValidatedScope::covers(this)) {  // a layer's attention: the layer checked
    return detail::attend(weights, call);
  }
  detail::check_defined(call.query, call.key, call.value);
  const detail::CallPlan plan = detail::plan_call(weights, call);
  detail::check_module_inputs(options, detail::Projector::first_weight(*this), call,
                              /*check_attn_mask_shape=*/!plan.attn_mask_dropped);
  return detail::run_plan(plan, weights, call);
}

}  // namespace mha
