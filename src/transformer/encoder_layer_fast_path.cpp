#include "transformer/encoder_layer_fast_path.h"

#include <ATen/autocast_mode.h>
#include <c10/core/DeviceType.h>

#include "attention/call_plan.h"
#include "attention/masks.h"
#include "linear/converted_module.h"
#include "linear/weight_form.h"
#include "mha/multihead_attention.h"
#include "transformer/layer_parts.h"

namespace mha {
namespace detail {

using torch::Tensor;

std::vector<Tensor> fast_path_tensor_args(const TransformerEncoderLayerImpl& layer,
                                          const Tensor& src) {
  const auto& attn = *layer.self_attn;
  return {src,
          attn.in_proj_weight,
          attn.in_proj_bias,
          attn.out_proj->weight,
          attn.out_proj->bias,
          layer.norm1->weight,
          layer.norm1->bias,
          layer.norm2->weight,
          layer.norm2->bias,
          layer.linear1->weight,
          layer.linear1->bias,
          layer.linear2->weight,
          layer.linear2->bias};
}

bool fast_path_device(const Tensor& t) {
  const auto type = t.device().type();
  return type == c10::DeviceType::CPU || type == c10::DeviceType::CUDA ||
         type == c10::DeviceType::XPU || type == c10::DeviceType::PrivateUse1;
}

bool has_converted_weights(const std::vector<Tensor>& tensor_args) {
  for (const auto& t : tensor_args) {
    if (is_placeholder(t)) return true;
  }
  return false;
}

bool grad_blocks_fast_path(const std::vector<Tensor>& tensor_args) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const auto& t : tensor_args) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

std::string why_not_layer_fast_path(const TransformerEncoderLayerImpl& layer,
                                    const Tensor& src,
                                    const Tensor& src_mask,
                                    const Tensor& src_key_padding_mask) {
  const auto& attn = *layer.self_attn;
  if (!get_fastpath_enabled()) return "torch.backends.mha.get_fastpath_enabled() was not True";
  if (src.dim() != 3) return "input not batched; expected src.dim() of 3";
  if (layer.is_training()) return "training is enabled";
  if (!attn.options.batch_first()) return "self_attn.batch_first was not True";
  if (!attn.in_proj_bias.defined()) return "self_attn was passed bias=False";
  if (holds_int8(layer)) {
    return "some weights are int8 (mha::quantize_dynamic)";
  }
  if (!attn.in_proj_weight.defined()) return "self_attn._qkv_same_embed_dim was not True";
  if (activation_relu_or_gelu(layer.options.activation()) == 0) {
    return "activation_relu_or_gelu was not True";
  }
  if (layer.norm1->options.eps() != layer.norm2->options.eps()) {
    return "norm1.eps is not equal to norm2.eps";
  }
  if (src.is_nested() && (src_key_padding_mask.defined() || src_mask.defined())) {
    return "neither src_key_padding_mask nor src_mask are not supported with NestedTensor input";
  }
  if (attn.options.num_heads() % 2 == 1) return "num_head is odd";
  if (at::autocast::is_autocast_enabled(at::kCUDA)) return "autocast is enabled";
  const auto tensor_args = fast_path_tensor_args(layer, src);
  for (const auto& t : tensor_args) {
    if (!fast_path_device(t)) {
      return "some Tensor argument's device is neither one of cpu, cuda, xpu, privateuse1";
    }
  }
  if (grad_blocks_fast_path(tensor_args)) {
    return "grad is enabled and at least one of query or the input/output projection weights "
           "or biases requires_grad";
  }
  return "";
}

bool layer_takes_mha_kernels(const TransformerEncoderLayerImpl& layer,
                             const Tensor& src,
                             const Tensor& src_mask,
                             const Tensor& src_key_padding_mask) {
  if (python_kernels_enabled() || src.is_nested()) return false;
  if (holds_prepacked(layer)) return true;  // Python's op takes float weights
  // src (N, L, E): the fast path is batch-first
  return choose_fast_path_kernel(src.size(0), src.size(1), /*need_weights=*/false,
                                 src_mask.defined() || src_key_padding_mask.defined(),
                                 /*prepacked=*/false) == AttentionKernel::kFused;
}

Tensor layer_fast_path(const TransformerEncoderLayerImpl& layer,
                       const Tensor& src,
                       const Tensor& src_mask,
                       const Tensor& src_key_padding_mask) {
  const auto& attn = *layer.self_attn;
  const auto [merged, mask_type] =
      merge_masks(src_mask, src_key_padding_mask, src, attn.options.num_heads());
  // Python's op takes float weights: prepacked ones (mha::prepack) unpacked.
  const auto weight = [](const torch::nn::Module& owner, const char* param, const Tensor& value) {
    return float_weight(owner, param, value);
  };
  // src (N, L, E) or nested -> same
  return at::_transformer_encoder_layer_fwd(
      src, attn.options.embed_dim(), attn.options.num_heads(),
      weight(attn, "in_proj_weight", attn.in_proj_weight), attn.in_proj_bias,
      weight(*attn.out_proj, "weight", attn.out_proj->weight), attn.out_proj->bias,
      activation_relu_or_gelu(layer.options.activation()) == 2, layer.options.norm_first(),
      layer.norm1->options.eps(), layer.norm1->weight, layer.norm1->bias, layer.norm2->weight,
      layer.norm2->bias, weight(*layer.linear1, "weight", layer.linear1->weight),
      layer.linear1->bias, weight(*layer.linear2, "weight", layer.linear2->weight),
      layer.linear2->bias, merged, mask_type);
}

}  // namespace detail
}  // namespace mha
