#pragma once

// Private: the transformer layers' input checks. Each error names the
// layer's own argument (src, tgt, memory, src_mask, ...) with the expected
// and the actual shape, before any computation, so a bad call changes nothing.

#include <torch/types.h>

#include <cstdint>
#include <optional>

namespace mha {
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

}  // namespace detail
}  // namespace mha
