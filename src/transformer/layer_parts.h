#pragma once

// Private: what the encoder and decoder layers share: building their
// submodules as Python does, the activation, and printing the options.

#include <torch/types.h>

#include <functional>
#include <initializer_list>
#include <ostream>

#include "mha/transformer_layers.h"

namespace mha {
namespace detail {

/// Python's `MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
/// batch_first=batch_first)` of a transformer layer.
MultiheadAttention make_attention(const TransformerLayerOptions& options);

/// Python's `Linear(in_features, out_features, bias=bias)` (LibTorch's Linear
/// has Python's init).
torch::nn::Linear make_linear(int64_t in_features, int64_t out_features, bool bias);

/// Python's `LayerNorm(d_model, eps=layer_norm_eps, bias=bias)`.
LayerNorm make_norm(const TransformerLayerOptions& options);

/// Registers `layer`'s feed-forward block as Python's layers build it, in
/// its order (the same seeded init and `state_dict()` keys): `linear1`,
/// `dropout`, `linear2`.
template <typename Layer>
void register_feed_forward(Layer& layer, const TransformerLayerOptions& options) {
  const int64_t d_model = options.d_model(), ff = options.dim_feedforward();
  layer.linear1 = layer.register_module("linear1", make_linear(d_model, ff, options.bias()));
  layer.dropout = layer.register_module("dropout", torch::nn::Dropout(options.dropout()));
  layer.linear2 = layer.register_module("linear2", make_linear(ff, d_model, options.bias()));
}

/// Python's `activation_relu_or_gelu`: 1 for `kReLU`, 2 for `kGELU`, 0 for a function.
int activation_relu_or_gelu(const TransformerActivation& activation);

/// The activation applied to x (any shape): `F.relu`, `F.gelu` or the function.
torch::Tensor apply_activation(const TransformerActivation& activation, const torch::Tensor& x);

/// Python's `linear2(dropout(activation(linear1(x))))`: x (..., E) ->
/// (..., dim_feedforward) -> (..., E). The GEMMs are `at::linear`'s, as
/// Python's nn.Linear (LibTorch's Linear adds the bias after a matmul for 3-D
/// input, and takes no nested tensor), or the converted forms' GEMMs where
/// `mha::prepack` (within float32 rounding) or `mha::quantize_dynamic`
/// converted them (`linear_int8_or_packed`).
torch::Tensor feed_forward(const TransformerActivation& activation,
                           const torch::nn::LinearImpl& linear1,
                           torch::nn::DropoutImpl& dropout,
                           const torch::nn::LinearImpl& linear2,
                           const torch::Tensor& x);

/// Python's `_sa_block`: `dropout(self_attn(x, x, x, attn_mask=attn_mask,
/// key_padding_mask=key_padding_mask, need_weights=False, is_causal=is_causal)[0])`,
/// x (L, N, E) or (N, L, E) -> the same shape.
torch::Tensor self_attention_block(MultiheadAttentionImpl& self_attn,
                                   torch::nn::DropoutImpl& dropout,
                                   const torch::Tensor& x,
                                   const torch::Tensor& attn_mask,
                                   const torch::Tensor& key_padding_mask,
                                   bool is_causal);

/// Python's residual `x + block_out` (both shaped as the layer's input).
/// Outside autograd, where `block_out` is a block's fresh output of x's
/// shape and dtype, the sum is written into it in place: no buffer per
/// residual to map and fault in, and the same bits (float addition commutes).
torch::Tensor residual_add(const torch::Tensor& x, torch::Tensor block_out);

/// One residual sublayer of a layer: its norm and its block (the layer's
/// input shape in and out).
struct Sublayer {
  LayerNormImpl& norm;
  std::function<torch::Tensor(const torch::Tensor&)> block;
};

/// Python's layer body over `sublayers` in order (Fig. 1 of
/// https://arxiv.org/pdf/2002.04745v1.pdf): with `norm_first`, x = x +
/// block(norm(x)) for each; else x = norm(x + block(x)). `x` and the result
/// are shaped as the layer's input.
torch::Tensor residual_sublayers(const torch::Tensor& x,
                                 bool norm_first,
                                 std::initializer_list<Sublayer> sublayers);

/// Writes `name(d_model=.., nhead=.., dim_feedforward=.., dropout=.., activation=..,
/// layer_norm_eps=.., batch_first=.., norm_first=.., bias=..)`.
void print_layer_options(std::ostream& stream,
                         const char* name,
                         const TransformerLayerOptions& options);

}  // namespace detail
}  // namespace mha
