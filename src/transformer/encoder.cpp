#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <mutex>
#include <set>
#include <string>

#include "attention/masks.h"
#include "common/reused_buffers.h"
#include "common/validated_scope.h"
#include "linear/converted_module.h"
#include "linear/int8_linear.h"
#include "mha/transformer_coder.h"
#include "module/cached_call_checks.h"
#include "transformer/encoder_layer_fast_path.h"
#include "transformer/input_checks.h"
#include "transformer/layer_parts.h"
#include "transformer/stack_parts.h"

namespace mha {

using torch::Tensor;

namespace {

/// Python's reason, found in `TransformerEncoder.__init__`, why the layer
/// cannot take nested tensors; empty if it can.
std::string why_not_nested_layer(const TransformerEncoderLayerImpl& layer) {
  const auto& attn = *layer.self_attn;
  if (layer.options.norm_first()) return "encoder_layer.norm_first was True";
  if (!attn.options.batch_first()) {
    return "encoder_layer.self_attn.batch_first was not True(use batch_first for better "
           "inference performance)";
  }
  if (!attn.in_proj_weight.defined()) {
    return "encoder_layer.self_attn._qkv_same_embed_dim was not True";
  }
  if (!attn.in_proj_bias.defined()) return "encoder_layer.self_attn was passed bias=False";
  if (detail::activation_relu_or_gelu(layer.options.activation()) == 0) {
    return "encoder_layer.activation_relu_or_gelu was not True";
  }
  if (layer.norm1->options.eps() != layer.norm2->options.eps()) {
    return "encoder_layer.norm1.eps was not equal to encoder_layer.norm2.eps";
  }
  if (attn.options.num_heads() % 2 == 1) return "encoder_layer.self_attn.num_heads is odd";
  return "";
}

/// Warns `message` the first time this process sees it, as Python's default
/// warning filter shows each message of a call site once: a server that
/// builds many stacks is told once.
void warn_once(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  bool first = false;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    first = warned.insert(message).second;
  }
  if (first) TORCH_WARN(message);
}

/// Python's `_get_seq_len`: L of a batched or unbatched src; none for a
/// nested src (its sequences have their own lengths).
std::optional<int64_t> seq_len_of(const Tensor& src, bool batch_first) {
  if (src.is_nested()) return std::nullopt;
  return src.dim() == 2 ? src.size(0) : src.size(batch_first ? 1 : 0);
}

}  // namespace

TransformerEncoderImpl::TransformerEncoderImpl(TransformerEncoderOptions options_)
    : options(std::move(options_)) {
  reset();
  const std::string why_not = why_not_nested_layer(*options.encoder_layer());
  use_nested_tensor = options.enable_nested_tensor() && why_not.empty();
  if (options.enable_nested_tensor() && !why_not.empty()) {
    warn_once("enable_nested_tensor is True, but self.use_nested_tensor is False because " +
              why_not);
  }
}

void TransformerEncoderImpl::reset() {
  detail::register_stack_parts(*this, options.encoder_layer(), options.num_layers(),
                               options.norm());
}

std::string TransformerEncoderImpl::why_not_nested(const Tensor& src,
                                                   const Tensor& mask,
                                                   const Tensor& src_key_padding_mask) const {
  if (!get_fastpath_enabled()) return "torch.backends.mha.get_fastpath_enabled() was not True";
  if (!use_nested_tensor) return "self.use_nested_tensor (set in init) was not True";
  const auto& first = *layers->ptr<TransformerEncoderLayerImpl>(0);
  if (first.is_training()) return "self.layers[0] was in training mode";
  if (src.dim() != 3) return "input not batched; expected src.dim() of 3";
  if (!src_key_padding_mask.defined()) return "src_key_padding_mask was None";
  if (options.mask_check() &&
      !at::_nested_tensor_from_mask_left_aligned(src, src_key_padding_mask.logical_not())) {
    return "mask_check enabled, and src and src_key_padding_mask was not left aligned";
  }
  if (src.is_nested()) return "NestedTensor input is not supported";
  if (mask.defined()) return "src_key_padding_mask and mask were both supplied";
  if (at::autocast::is_autocast_enabled(at::kCUDA)) return "autocast is enabled";
  if (!detail::fast_path_device(src)) return "src device is neither one of cpu, cuda, xpu";
  if (detail::has_converted_weights(detail::fast_path_tensor_args(first, src))) {
    return "some weights of self.layers[0] are converted (mha::quantize_dynamic, mha::prepack)";
  }
  if (detail::grad_blocks_fast_path(detail::fast_path_tensor_args(first, src))) {
    return "grad is enabled and at least one of query or the input/output projection weights "
           "or biases requires_grad";
  }
  return "";
}

Tensor TransformerEncoderImpl::forward(const Tensor& src,
                                       const Tensor& mask,
                                       const Tensor& src_key_padding_mask,
                                       std::optional<bool> is_causal) {
  TORCH_CHECK(layers->size() > 0, "TransformerEncoder has no layers (num_layers=0)");
  const auto& first = *layers->ptr<TransformerEncoderLayerImpl>(0);
  if (!detail::ValidatedScope::covers(this)) {
    detail::check_encoder_inputs(first, src, mask, "mask", src_key_padding_mask);
  }
  const detail::ValidatedScope validated(detail::modules_of(layers));
  const auto dtype = src.scalar_type();
  const Tensor kpm = detail::canonical_key_padding_mask(src_key_padding_mask, mask, dtype,
                                                        {"src_key_padding_mask", "mask"});
  const Tensor attn_mask = detail::canonical_attn_mask(mask, dtype, "mask");

  const detail::ReusedBuffers reused;  // each layer's large outputs in the last one's blocks
  Tensor output = src;
  Tensor kpm_for_layers = kpm;
  const bool convert_to_nested = why_not_nested(src, attn_mask, kpm).empty();
  if (convert_to_nested) {
    // (N, L, E) padded -> nested of N sequences of their unpadded lengths
    output = at::_nested_tensor_from_mask(output, kpm.logical_not(), /*mask_check=*/false);
    kpm_for_layers = Tensor();
  }
  const bool causal =
      detect_is_causal_mask(attn_mask, is_causal, seq_len_of(src, first.options.batch_first()));
  for (const auto& layer : *layers) {
    output = layer->as<TransformerEncoderLayerImpl>()->forward(output, attn_mask, kpm_for_layers,
                                                               causal);
  }
  if (convert_to_nested) {
    output = output.to_padded_tensor(0.0, src.sizes());  // padded positions: zeros, (N, L, E)
  }
  if (!norm.is_empty()) {
    output = norm.forward(output);
  }
  return output;
}

Tensor TransformerEncoderImpl::forward_packed(const Tensor& src, const Tensor& cu_seqlens) {
  TORCH_CHECK(layers->size() > 0, "TransformerEncoder has no layers (num_layers=0)");
  // Each layer checks its call; none changes state, so a throw leaves nothing half done.
  torch::NoGradGuard no_grad;
  const detail::ReusedBuffers reused;
  Tensor output = src;  // (T, E)
  for (const auto& layer : *layers) {
    output = layer->as<TransformerEncoderLayerImpl>()->forward_packed(output, cu_seqlens);
  }
  return norm.is_empty() ? output : norm.forward(output);
}

TransformerEncoderCache TransformerEncoderImpl::make_cache(int64_t max_len) const {
  return TransformerEncoderCache(this, layers->size(), max_len);
}

namespace {

/// The cached step of `stack` over `cache`, one per layer (checked here).
Tensor forward_cached_layers(TransformerEncoderImpl& stack,
                             const Tensor& src,
                             std::vector<KVCache>& cache,
                             const Tensor& key_padding_mask) {
  TORCH_CHECK(stack.layers->size() > 0, "TransformerEncoder has no layers (num_layers=0)");
  TORCH_CHECK_VALUE(cache.size() == stack.layers->size(),
                    fmt::format("expected one cache per layer ({}), but got {}",
                                stack.layers->size(), cache.size()));
  // Every layer's attention call checked once, before the first writes its cache.
  if (!detail::ValidatedScope::covers(&stack)) {
    for (size_t i = 0; i < stack.layers->size(); ++i) {
      detail::check_cached_attention(*stack.layers[i]->as<TransformerEncoderLayerImpl>()->self_attn,
                                     cache[i], src, src, key_padding_mask);
    }
  }
  const detail::ValidatedScope validated(detail::checked_modules<TransformerEncoderLayerImpl>(
      stack.layers, &TransformerEncoderLayerImpl::self_attn));
  const detail::ReusedBuffers reused;
  Tensor output = src;
  for (size_t i = 0; i < stack.layers->size(); ++i) {
    output = stack.layers[i]->as<TransformerEncoderLayerImpl>()->forward_cached(output, cache[i],
                                                                                key_padding_mask);
  }
  return stack.norm.is_empty() ? output : stack.norm.forward(output);
}

}  // namespace

Tensor TransformerEncoderImpl::forward_cached(const Tensor& src,
                                              TransformerEncoderCache& cache,
                                              const Tensor& key_padding_mask) {
  TORCH_CHECK_VALUE(cache.owner() == this,
                    "cache must come from this stack's make_cache(), but it was made by another "
                    "TransformerEncoder");
  return forward_cached_layers(*this, src, cache.layers(), key_padding_mask);
}

template class detail::ConvertibleModule<TransformerEncoderImpl>;

void TransformerEncoderImpl::pretty_print(std::ostream& stream) const {
  stream << "mha::TransformerEncoder(num_layers=" << options.num_layers() << ")";
}

}  // namespace mha
