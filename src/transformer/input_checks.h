#pragma once

// Private: the transformer layers' input checks. Each error names the
// layer's own argument (src, tgt, memory, src_mask, ...) with the expected
// and the actual shape, before any computation, so a bad call changes nothing.

#include <torch/types.h>

#include <cstdint>
#include <optional>

namespace mha {

class TransformerEncoderLayerImpl;
class TransformerDecoderLayerImpl;

namespace detail {

/// Batch size (nullopt when unbatched) and length of a sequence argument.
struct SequenceShape {
  std::optional<int64_t> batch;
  int64_t length;
};

/// Checks that `x` is (L, E), or (L, N, E) / (N, L, E) with `batch_first`,
/// with E == d_model; returns its batch and length.
SequenceShape check_sequence(const torch::Tensor& x,
                             const char* name,
                             int64_t d_model,
                             bool batch_first);

/// Checks that `memory` (of shape `s`) is batched as tgt (of shape `t`) is,
/// with the same batch size.
void check_same_batch(const SequenceShape& t, const SequenceShape& s, const torch::Tensor& memory);

/// Checks an attention mask of a query of shape `query` over `keys` keys:
/// (L, S), or (N * nhead, L, S) ((nhead, L, S) unbatched). Undefined passes.
void check_attention_mask(const torch::Tensor& mask,
                          const char* name,
                          const SequenceShape& query,
                          int64_t keys,
                          int64_t nhead);

/// Checks a key padding mask of `keys`: (N, S), or (S) unbatched. Undefined passes.
void check_padding_mask(const torch::Tensor& mask, const char* name, const SequenceShape& keys);

/// The checks of an encoder layer's or an encoder's call, before any work:
/// `src` (its rank, d_model, the parameters' dtype and device), the attention
/// mask `src_mask` (named `mask_name`: "src_mask" for the layer, "mask" for
/// the encoder) and `src_key_padding_mask`. A nested `src` is checked by the
/// ATen kernels that take it.
void check_encoder_inputs(const TransformerEncoderLayerImpl& layer,
                          const torch::Tensor& src,
                          const torch::Tensor& src_mask,
                          const char* mask_name,
                          const torch::Tensor& src_key_padding_mask);

/// The tensors of a decoder layer's or a decoder's call (undefined: none).
struct DecoderInputs {
  const torch::Tensor& tgt;
  const torch::Tensor& memory;
  const torch::Tensor& tgt_mask;
  const torch::Tensor& memory_mask;
  const torch::Tensor& tgt_key_padding_mask;
  const torch::Tensor& memory_key_padding_mask;
};

/// The checks of a decoder layer's or a decoder's call, before any work:
/// `tgt` and `memory` (rank, d_model, the parameters' dtype and device, the
/// same batch), `tgt_mask` (T, T), `memory_mask` (T, S) (or per head), the
/// padding masks (N, T) and (N, S), each on its input's device.
void check_decoder_inputs(const TransformerDecoderLayerImpl& layer, const DecoderInputs& inputs);

}  // namespace detail
}  // namespace mha
