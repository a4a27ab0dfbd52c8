#pragma once

// The small seeded stacks the stack-cache tests share: E = 512 (the packed
// GEMMs' size), 8 heads, eval, dropout 0.

#include <mha/transformer.h>
#include <torch/torch.h>

#include <cstdint>

namespace mha::test {

inline constexpr int64_t kStackE = 512, kStackHeads = 8;

/// A causal encoder stack of `layers` layers (a decoder-only model's).
inline mha::TransformerEncoder make_causal_stack(int64_t layers) {
  torch::manual_seed(0);
  mha::TransformerEncoder stack(
      mha::TransformerEncoderOptions(
          mha::TransformerEncoderLayer(mha::TransformerEncoderLayerOptions(kStackE, kStackHeads)
                                           .dim_feedforward(64)
                                           .dropout(0.0)),
          layers)
          .enable_nested_tensor(false));
  stack->eval();
  return stack;
}

/// A decoder stack of `layers` layers.
inline mha::TransformerDecoder make_decoder(int64_t layers) {
  torch::manual_seed(0);
  mha::TransformerDecoder decoder(mha::TransformerDecoderOptions(
      mha::TransformerDecoderLayer(mha::TransformerDecoderLayerOptions(kStackE, kStackHeads)
                                       .dim_feedforward(64)
                                       .dropout(0.0)),
      layers));
  decoder->eval();
  return decoder;
}

}  // namespace mha::test
