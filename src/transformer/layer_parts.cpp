#include "transformer/layer_parts.h"

#include <c10/core/InferenceMode.h>
#include <fmt/format.h>

#include "linear/int8_linear.h"
#include "linear/packed_linear.h"
#include "linear/weight_form.h"

namespace mha {

namespace {

/// The options of a layer's attention modules.
MultiheadAttentionOptions attention_options(const TransformerLayerOptions& options) {
  return MultiheadAttentionOptions(options.d_model(), options.nhead())
      .dropout(options.dropout())
      .bias(options.bias())
      .batch_first(options.batch_first());
}

}  // namespace

void TransformerLayerOptions::validate() const { attention_options(*this).validate(); }

namespace detail {

MultiheadAttention make_attention(const TransformerLayerOptions& options) {
  return MultiheadAttention(attention_options(options));
}

torch::nn::Linear make_linear(int64_t in_features, int64_t out_features, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in_features, out_features).bias(bias));
}

LayerNorm make_norm(const TransformerLayerOptions& options) {
  return LayerNorm(
      LayerNormOptions({options.d_model()}).eps(options.layer_norm_eps()).bias(options.bias()));
}

int activation_relu_or_gelu(const TransformerActivation& activation) {
  if (std::holds_alternative<torch::enumtype::kReLU>(activation)) return 1;
  if (std::holds_alternative<torch::enumtype::kGELU>(activation)) return 2;
  return 0;
}

torch::Tensor apply_activation(const TransformerActivation& activation, const torch::Tensor& x) {
  switch (activation_relu_or_gelu(activation)) {
    case 1:
      return at::relu(x);
    case 2:
      return at::gelu(x);
    default:
      return std::get<std::function<torch::Tensor(const torch::Tensor&)>>(activation)(x);
  }
}

namespace {

/// activation(linear(x)): (..., in) -> (..., out); a ReLU or GELU after a
/// converted weight is the form's `forward_activated` (fused into a
/// prepacked GEMM).
torch::Tensor activated_linear(const TransformerActivation& activation,
                               const torch::nn::LinearImpl& linear,
                               const torch::Tensor& x) {
  const auto form = detail::linear_form(linear);
  const int relu_or_gelu = activation_relu_or_gelu(activation);
  if (form && relu_or_gelu != 0) {
    const auto fused = relu_or_gelu == 1 ? FusedActivation::kReLU : FusedActivation::kGELU;
    return detail::in_row_blocks(x, [&](const torch::Tensor& rows) {
      return form->forward_activated(rows, linear.bias, fused);
    });
  }
  torch::Tensor hidden = detail::linear_int8_or_packed(linear, x);  // (..., out)
  if (relu_or_gelu != 0 && !(at::GradMode::is_enabled() && hidden.requires_grad())) {
    // the GEMM's fresh output, activated in place (the same kernel, the same
    // bits): no second buffer of (..., out) to map and fault in per call
    return relu_or_gelu == 1 ? at::relu_(hidden) : at::gelu_(hidden);
  }
  return apply_activation(activation, hidden);
}

}  // namespace

torch::Tensor feed_forward(const TransformerActivation& activation,
                           const torch::nn::LinearImpl& linear1,
                           torch::nn::DropoutImpl& dropout,
                           const torch::nn::LinearImpl& linear2,
                           const torch::Tensor& x) {
  // (..., E) -> (..., dim_feedforward) -> (..., E)
  const torch::Tensor hidden = dropout.forward(activated_linear(activation, linear1, x));
  return detail::linear_int8_or_packed(linear2, hidden);
}

torch::Tensor residual_add(const torch::Tensor& x, torch::Tensor block_out) {
  const bool tracked =
      at::GradMode::is_enabled() && (x.requires_grad() || block_out.requires_grad());
  const bool writable = !block_out.is_inference() || c10::InferenceMode::is_enabled();
  if (tracked || !writable || block_out.is_nested() || x.is_nested() ||
      block_out.sizes() != x.sizes() || block_out.scalar_type() != x.scalar_type() ||
      !block_out.is_non_overlapping_and_dense()) {
    return x + block_out;
  }
  return block_out.add_(x);  // (..., E)
}

torch::Tensor residual_sublayers(const torch::Tensor& x,
                                 bool norm_first,
                                 std::initializer_list<Sublayer> sublayers) {
  torch::Tensor y = x;  // shaped as x throughout
  for (const Sublayer& sublayer : sublayers) {
    y = norm_first ? residual_add(y, sublayer.block(sublayer.norm.forward(y)))
                   : sublayer.norm.forward(residual_add(y, sublayer.block(y)));
  }
  return y;
}

torch::Tensor self_attention_block(MultiheadAttentionImpl& self_attn,
                                   torch::nn::DropoutImpl& dropout,
                                   const torch::Tensor& x,
                                   const torch::Tensor& attn_mask,
                                   const torch::Tensor& key_padding_mask,
                                   bool is_causal) {
  // x (L, N, E) or (N, L, E) -> same
  const torch::Tensor out =
      std::get<0>(self_attn.forward(x, x, x, key_padding_mask, /*need_weights=*/false, attn_mask,
                                    /*average_attn_weights=*/true, is_causal));
  return dropout.forward(out);
}

void print_layer_options(std::ostream& stream,
                         const char* name,
                         const TransformerLayerOptions& options) {
  static const char* const kActivations[] = {"<function>", "relu", "gelu"};
  stream << fmt::format(
      "{}(d_model={}, nhead={}, dim_feedforward={}, dropout={}, activation={}, "
      "layer_norm_eps={}, batch_first={}, norm_first={}, bias={})",
      name, options.d_model(), options.nhead(), options.dim_feedforward(), options.dropout(),
      kActivations[activation_relu_or_gelu(options.activation())], options.layer_norm_eps(),
      options.batch_first(), options.norm_first(), options.bias());
}

}  // namespace detail
}  // namespace mha
