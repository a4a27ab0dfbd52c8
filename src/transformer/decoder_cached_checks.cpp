#include "transformer/decoder_cached_checks.h"

#include <fmt/format.h>

#include "attention/input_checks.h"
#include "common/shape_format.h"
#include "module/cached_call_checks.h"
#include "transformer/input_checks.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

/// A padding mask: bool or the module's float dtype, on its device. Undefined passes.
void check_mask_type(const Tensor& mask, const char* name, const Tensor& param) {
  if (!mask.defined()) return;
  TORCH_CHECK_TYPE(
      mask.scalar_type() == at::kBool || mask.scalar_type() == param.scalar_type(),
      fmt::format("{} must be bool or of the module's dtype {}, but got {}", name,
                  c10::toString(param.scalar_type()), c10::toString(mask.scalar_type())));
  TORCH_CHECK(mask.device() == param.device(),
              fmt::format("{} must be on the module's device {}, but got {}", name,
                          param.device().str(), mask.device().str()));
}

/// The memory's positions: the given memory's (checked against tgt and the
/// cache), or the cached ones.
int64_t check_memory(const TransformerLayerOptions& options,
                     const TransformerDecoderLayerCache& cache,
                     const SequenceShape& t,
                     const Tensor& memory,
                     const Tensor& param) {
  const int64_t cached = cache.multihead_attn.length();
  TORCH_CHECK(cached > 0 || memory.defined(),
              "memory must be given on the first forward_cached call (it is projected once into "
              "the cache), but got an undefined tensor");
  if (!memory.defined()) return cached;
  const auto s = check_sequence(memory, "memory", options.d_model(), options.batch_first());
  check_same_batch(t, s, memory);
  TORCH_CHECK(s.length > 0, fmt::format("memory must have at least one position, but got shape {}",
                                        torch_size(memory.sizes())));
  TORCH_CHECK(cached == 0 || s.length == cached,
              fmt::format("memory must have the {} positions the cache holds (clear() the cache "
                          "to decode another memory), but got {}",
                          cached, s.length));
  check_dtype_and_device(param, memory, "memory");
  return s.length;
}

}  // namespace

void check_cached_step(const TransformerDecoderLayerImpl& layer,
                       const TransformerDecoderLayerCache& cache,
                       const DecoderInputs& inputs) {
  const auto& [tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask] =
      inputs;
  TORCH_INTERNAL_ASSERT(!tgt_mask.defined() && !memory_mask.defined());
  TORCH_CHECK(!layer.is_training(),
              "forward_cached is for inference, but the decoder is in training mode; call eval()");
  const auto& options = layer.options;
  const Tensor& param = layer.linear1->weight;
  const auto t = check_sequence(tgt, "tgt", options.d_model(), options.batch_first());
  TORCH_CHECK(t.length > 0, fmt::format("tgt must have at least one new position, but got shape {}",
                                        torch_size(tgt.sizes())));
  check_dtype_and_device(param, tgt, "tgt");
  const int64_t memory_length = check_memory(options, cache, t, memory, param);
  const int64_t decoded = cache.self_attn.length();
  if (cache.multihead_attn.length() > 0) {
    const int64_t batch = cache.multihead_attn.batch_size();
    TORCH_CHECK(t.batch.value_or(1) == batch,
                fmt::format("tgt must have the cache's batch size {} (reorder() changes it), but "
                            "got {}",
                            batch, t.batch.value_or(1)));
  }
  check_padding_mask(tgt_key_padding_mask, "tgt_key_padding_mask",
                     SequenceShape{t.batch, decoded + t.length});
  check_padding_mask(memory_key_padding_mask, "memory_key_padding_mask",
                     SequenceShape{t.batch, memory_length});
  check_mask_type(tgt_key_padding_mask, "tgt_key_padding_mask", param);
  check_mask_type(memory_key_padding_mask, "memory_key_padding_mask", param);
}

void check_cached_attentions(const TransformerDecoderLayerImpl& layer,
                             TransformerDecoderLayerCache& cache,
                             const DecoderInputs& inputs) {
  check_cached_attention(*layer.self_attn, cache.self_attn, inputs.tgt, inputs.tgt,
                         inputs.tgt_key_padding_mask);
  const Tensor new_memory = cache.multihead_attn.length() > 0 ? Tensor() : inputs.memory;
  check_cached_attention(*layer.multihead_attn, cache.multihead_attn, inputs.tgt, new_memory,
                         inputs.memory_key_padding_mask);
}

}  // namespace detail
}  // namespace mha
