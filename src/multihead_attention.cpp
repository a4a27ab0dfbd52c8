#include "mha/multihead_attention.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/nn/init.h>

#include <atomic>
#include <string>
#include <utility>

#include "fast_path.h"
#include "generator_state.h"
#include "input_checks.h"
#include "masks.h"
#include "mha/functional.h"

namespace mha {

using torch::Tensor;
namespace F = mha::functional;

namespace {

std::atomic<bool> fastpath_enabled{true};

}  // namespace

MultiheadAttentionOptions::MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads)
    : embed_dim_(embed_dim), num_heads_(num_heads) {}

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions& options_)
    : torch::nn::Cloneable<MultiheadAttentionImpl>("mha::MultiheadAttention"), options(options_) {
  reset();
}

bool MultiheadAttentionImpl::qkv_same_embed_dim() const {
  const int64_t embed_dim = options.embed_dim();
  return options.kdim().value_or(embed_dim) == embed_dim &&
         options.vdim().value_or(embed_dim) == embed_dim;
}

void MultiheadAttentionImpl::reset() {
  detail::check_module_options(options);
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

std::shared_ptr<torch::nn::Module> MultiheadAttentionImpl::clone(
    const std::optional<torch::Device>& device) const {
  return detail::clone_keeping_generator(*this, device);
}

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

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward(const Tensor& query,
                                                           const Tensor& key,
                                                           const Tensor& value,
                                                           const Tensor& key_padding_mask,
                                                           bool need_weights,
                                                           const Tensor& attn_mask,
                                                           bool average_attn_weights,
                                                           bool is_causal) {
  detail::check_defined(query, key, value);
  // Where Python calls its native fused op (silently not without biases), so
  // do we, with the masks as given: bool or none there.
  const std::string why_not_fast_path =
      detail::why_not_fast_path(*this, query, key, value, key_padding_mask, attn_mask);
  const bool fast_path = why_not_fast_path.empty() && in_proj_bias.defined();
  const bool attn_mask_dropped =
      !fast_path && detail::causal_hint_drops_attn_mask(is_causal, need_weights, key_padding_mask);
  const Tensor& first_weight = in_proj_weight.defined() ? in_proj_weight : q_proj_weight;
  detail::check_module_inputs(options, first_weight, query, key, value, key_padding_mask, attn_mask,
                              /*check_attn_mask_shape=*/!attn_mask_dropped);
  if (fast_path) {
    const bool masked = key_padding_mask.defined() || attn_mask.defined();
    const auto kernel =  // query: (N, L, E)
        detail::choose_fast_path_kernel(query.size(0), query.size(1), need_weights, masked);
    return detail::fast_path_forward(kernel, *this, query, key_padding_mask, need_weights,
                                     attn_mask, average_attn_weights, is_causal);
  }

  // Both masks become additive floats of the query's dtype (Python's order):
  // other dtypes are rejected here, mismatched types warn.
  const bool is_batched = query.dim() == 3;
  const Tensor kpm =
      detail::canonical_key_padding_mask(key_padding_mask, attn_mask, query.scalar_type());
  const Tensor mask = F::canonical_mask(attn_mask, "attn_mask", std::nullopt, "",
                                        query.scalar_type(), /*check_other=*/false);

  TORCH_CHECK(
      !(query.is_nested() || key.is_nested() || value.is_nested()),
      "MultiheadAttention does not support NestedTensor outside of its fast path. The fast path "
      "was not hit because ",
      why_not_fast_path);

  // batch_first: (N, L, E) -> (L, N, E), keeping which inputs are the same tensor.
  Tensor q = query, k = key, v = value;
  const bool transpose = options.batch_first() && is_batched;
  if (transpose) {
    q = query.transpose(1, 0);
    k = key.is_same(query) ? q : key.transpose(1, 0);
    v = value.is_same(key) ? k : value.is_same(query) ? q : value.transpose(1, 0);
  }

  auto func_options =
      F::MultiheadAttentionForwardFuncOptions(
          options.embed_dim(), options.num_heads(), in_proj_weight, in_proj_bias, bias_k, bias_v,
          options.add_zero_attn(), options.dropout(), out_proj->weight, out_proj->bias)
          .training(is_training())
          .key_padding_mask(kpm)
          .need_weights(need_weights)
          .attn_mask(mask)
          .average_attn_weights(average_attn_weights)
          .is_causal(is_causal);
  if (!qkv_same_embed_dim()) {
    func_options.use_separate_proj_weight(true)
        .q_proj_weight(q_proj_weight)
        .k_proj_weight(k_proj_weight)
        .v_proj_weight(v_proj_weight);
  }
  auto [out, weights] = F::multi_head_attention_forward(q, k, v, func_options);
  if (transpose) {
    out = out.transpose(1, 0);  // (L, N, E) -> (N, L, E)
  }
  return {out, weights};
}

void set_fastpath_enabled(bool enabled) { fastpath_enabled.store(enabled); }

bool get_fastpath_enabled() { return fastpath_enabled.load(); }

FastPathGuard::FastPathGuard(bool enabled) : previous_(fastpath_enabled.exchange(enabled)) {}

FastPathGuard::~FastPathGuard() { fastpath_enabled.store(previous_); }

}  // namespace mha
