#include "transformer/input_checks.h"

#include <fmt/format.h>

#include <vector>

#include "attention/input_checks.h"
#include "attention/projector.h"
#include "common/shape_format.h"
#include "mha/transformer_layers.h"

namespace mha {
namespace detail {

SequenceShape check_sequence(const torch::Tensor& x,
                             const char* name,
                             int64_t d_model,
                             bool batch_first) {
  TORCH_CHECK(x.defined(), fmt::format("{} must be a defined tensor", name));
  TORCH_CHECK(x.dim() == 2 || x.dim() == 3,
              fmt::format("{} must be unbatched 2-D or batched 3-D, but got a {}-D tensor of "
                          "shape {}",
                          name, x.dim(), torch_size(x.sizes())));
  TORCH_CHECK(x.size(-1) == d_model,
              fmt::format("{} must have d_model={} features in its last dimension, but got "
                          "shape {}",
                          name, d_model, torch_size(x.sizes())));
  if (x.dim() == 2) {
    return {std::nullopt, x.size(0)};  // (L, E)
  }
  return batch_first ? SequenceShape{x.size(0), x.size(1)}   // (N, L, E)
                     : SequenceShape{x.size(1), x.size(0)};  // (L, N, E)
}

void check_same_batch(const SequenceShape& t, const SequenceShape& s, const torch::Tensor& memory) {
  TORCH_CHECK(t.batch.has_value() == s.batch.has_value(),
              fmt::format("memory must be {} as tgt is, but got a {}-D tensor",
                          t.batch ? "batched (3-D)" : "unbatched (2-D)", memory.dim()));
  TORCH_CHECK(t.batch == s.batch, fmt::format("memory must have tgt's batch size {}, but got {}",
                                              t.batch.value_or(0), s.batch.value_or(0)));
}

void check_attention_mask(const torch::Tensor& mask,
                          const char* name,
                          const SequenceShape& query,
                          int64_t keys,
                          int64_t nhead) {
  if (!mask.defined()) return;
  const std::vector<int64_t> two_d{query.length, keys};
  const std::vector<int64_t> three_d{query.batch.value_or(1) * nhead, query.length, keys};
  const bool ok = (mask.dim() == 2 && mask.sizes() == c10::IntArrayRef(two_d)) ||
                  (mask.dim() == 3 && mask.sizes() == c10::IntArrayRef(three_d));
  TORCH_CHECK(ok, fmt::format("{} must have shape {} or {}, but got {}", name, python_tuple(two_d),
                              python_tuple(three_d), torch_size(mask.sizes())));
}

void check_padding_mask(const torch::Tensor& mask, const char* name, const SequenceShape& keys) {
  if (!mask.defined()) return;
  const std::vector<int64_t> expected = keys.batch ? std::vector<int64_t>{*keys.batch, keys.length}
                                                   // (N, S)
                                                   : std::vector<int64_t>{keys.length};  // (S)
  TORCH_CHECK(mask.sizes() == c10::IntArrayRef(expected),
              fmt::format("{} must have shape {}, but got {}", name, python_tuple(expected),
                          torch_size(mask.sizes())));
}

void check_encoder_inputs(const TransformerEncoderLayerImpl& layer,
                          const torch::Tensor& src,
                          const torch::Tensor& src_mask,
                          const char* mask_name,
                          const torch::Tensor& src_key_padding_mask) {
  if (src.is_nested()) return;
  const auto& options = layer.options;
  const auto shape = check_sequence(src, "src", options.d_model(), options.batch_first());
  check_dtype_and_device(Projector::first_weight(*layer.self_attn), src, "src");
  check_attention_mask(src_mask, mask_name, shape, shape.length, options.nhead());
  check_mask_device(src_mask, mask_name, src, "src");
  check_padding_mask(src_key_padding_mask, "src_key_padding_mask", shape);
  check_mask_device(src_key_padding_mask, "src_key_padding_mask", src, "src");
}

void check_decoder_inputs(const TransformerDecoderLayerImpl& layer, const DecoderInputs& inputs) {
  const auto& [tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask] =
      inputs;
  const auto& options = layer.options;
  const int64_t d_model = options.d_model(), nhead = options.nhead();
  const auto t = check_sequence(tgt, "tgt", d_model, options.batch_first());
  const auto s = check_sequence(memory, "memory", d_model, options.batch_first());
  check_same_batch(t, s, memory);
  check_dtype_and_device(Projector::first_weight(*layer.self_attn), tgt, "tgt");
  check_dtype_and_device(Projector::first_weight(*layer.multihead_attn), memory, "memory");
  check_attention_mask(tgt_mask, "tgt_mask", t, t.length, nhead);
  check_attention_mask(memory_mask, "memory_mask", t, s.length, nhead);
  check_padding_mask(tgt_key_padding_mask, "tgt_key_padding_mask", t);
  check_padding_mask(memory_key_padding_mask, "memory_key_padding_mask", s);
  check_mask_device(tgt_mask, "tgt_mask", tgt, "tgt");
  check_mask_device(memory_mask, "memory_mask", tgt, "tgt");
  check_mask_device(tgt_key_padding_mask, "tgt_key_padding_mask", tgt, "tgt");
  check_mask_device(memory_key_padding_mask, "memory_key_padding_mask", memory, "memory");
}

}  // namespace detail
}  // namespace mha
