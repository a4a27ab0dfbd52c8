#include <fmt/format.h>

#include "mha/transformer.h"
#include "transformer/layer_parts.h"

namespace mha {

using torch::Tensor;

TransformerDecoderOptions::TransformerDecoderOptions(TransformerDecoderLayer decoder_layer,
                                                     int64_t num_layers)
    : decoder_layer_(std::move(decoder_layer)), num_layers_(num_layers) {}

TransformerDecoderImpl::TransformerDecoderImpl(TransformerDecoderOptions options_)
    : options(std::move(options_)) {
  reset();
}

void TransformerDecoderImpl::reset() {
  TORCH_CHECK(options.num_layers() >= 0,
              fmt::format("num_layers must be non-negative, but got {}", options.num_layers()));
  layers = register_module("layers", torch::nn::ModuleList());
  const detail::CpuGeneratorStateGuard keep_generator;
  for (int64_t i = 0; i < options.num_layers(); ++i) {
    layers->push_back(options.decoder_layer()->clone());  // deep copies, as `_get_clones`
  }
  if (!options.norm().is_empty()) {
    norm = options.norm().clone();
    register_module("norm", norm.ptr());
  }
}

Tensor TransformerDecoderImpl::forward(const Tensor& tgt,
                                       const Tensor& memory,
                                       const Tensor& tgt_mask,
                                       const Tensor& memory_mask,
                                       const Tensor& tgt_key_padding_mask,
                                       const Tensor& memory_key_padding_mask,
                                       std::optional<bool> tgt_is_causal,
                                       bool memory_is_causal) {
  TORCH_CHECK(layers->size() > 0, "TransformerDecoder has no layers (num_layers=0)");
  TORCH_CHECK(tgt.defined() && (tgt.dim() == 2 || tgt.dim() == 3),
              "tgt must be unbatched 2-D or batched 3-D");
  // Python's `_get_seq_len`: T of a batched or unbatched tgt
  const bool batch_first = options.decoder_layer()->options.batch_first();
  const int64_t seq_len = tgt.dim() == 2 ? tgt.size(0) : tgt.size(batch_first ? 1 : 0);
  const bool causal = detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len);
  Tensor output = tgt;  // (T, N, E) or (N, T, E)
  for (const auto& layer : *layers) {
    output = layer->as<TransformerDecoderLayerImpl>()->forward(
        output, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
        causal, memory_is_causal);
  }
  if (!norm.is_empty()) {
    output = norm.forward(output);
  }
  return output;
}

void TransformerDecoderImpl::pretty_print(std::ostream& stream) const {
  stream << "mha::TransformerDecoder(num_layers=" << options.num_layers() << ")";
}

}  // namespace mha
