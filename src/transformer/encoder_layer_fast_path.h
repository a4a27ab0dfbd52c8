#pragma once

// Private: Python's `TransformerEncoderLayer` fast path
// (`torch._transformer_encoder_layer_fwd`), its conditions in Python's order
// and wording, and the conditions `TransformerEncoder` shares with it.

#include <torch/types.h>

#include <string>
#include <vector>

#include "mha/transformer_layers.h"

namespace mha {
namespace detail {

/// The 13 tensors Python's `tensor_args` lists: src, then the layer's
/// attention, norm and feed-forward weights and biases, in Python's order.
std::vector<torch::Tensor> fast_path_tensor_args(const TransformerEncoderLayerImpl& layer,
                                                 const torch::Tensor& src);

/// Python's `_supported_device_type`: cpu, cuda, xpu or the privateuse1 backend.
bool fast_path_device(const torch::Tensor& t);

/// Whether any of them is a converted weight's placeholder (int8 or
/// prepacked): Python's fast-path ops take float weights only.
bool has_converted_weights(const std::vector<torch::Tensor>& tensor_args);

/// Python's "grad is enabled and at least one of ... requires_grad".
bool grad_blocks_fast_path(const std::vector<torch::Tensor>& tensor_args);

/// Python's `why_not_sparsity_fast_path` of `TransformerEncoderLayer.forward`:
/// empty when Python calls `torch._transformer_encoder_layer_fwd`. The masks
/// are canonical (float or undefined). Python's forward-hook condition has no
/// C++ counterpart (LibTorch modules have no hooks).
std::string why_not_layer_fast_path(const TransformerEncoderLayerImpl& layer,
                                    const torch::Tensor& src,
                                    const torch::Tensor& src_mask,
                                    const torch::Tensor& src_key_padding_mask);

/// Python's fast-path call: masks merged by `merge_masks`, then
/// `at::_transformer_encoder_layer_fwd`. src (N, L, E) or nested; same shape out.
torch::Tensor layer_fast_path(const TransformerEncoderLayerImpl& layer,
                              const torch::Tensor& src,
                              const torch::Tensor& src_mask,
                              const torch::Tensor& src_key_padding_mask);

/// Whether a call on Python's fast path (`why_not_layer_fast_path` empty)
/// runs the layer's own steps instead of Python's op: with mha's kernels on
/// (`python_kernels_enabled()` false), for strided src (N, L, E) whose
/// self-attention takes mha's fused kernel (`choose_fast_path_kernel`: long
/// sequences), and always for prepacked weights (`mha::prepack`), which
/// Python's op cannot take. Python's op builds (N, H, L, L) scores; the
/// steps run the fused kernel (and the prepacked GEMMs), within float32
/// rounding of Python's op.
bool layer_takes_mha_kernels(const TransformerEncoderLayerImpl& layer,
                             const torch::Tensor& src,
                             const torch::Tensor& src_mask,
                             const torch::Tensor& src_key_padding_mask);

}  // namespace detail
}  // namespace mha
