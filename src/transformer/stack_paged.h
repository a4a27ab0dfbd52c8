#pragma once

// Private: the stacks' paged steps with the caller's advice for a step that
// does not fit (ContinuousBatch words it for its own options), so that the
// blocks are counted once per step, here.

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "mha/paged_kv_cache.h"
#include "mha/transformer_coder.h"

namespace mha {
namespace detail {

/// `TransformerEncoderImpl::forward_paged` of `stack` over `cache` (one per
/// layer); `fix`: what the caller can do about too few blocks.
torch::Tensor encoder_paged_step(TransformerEncoderImpl& stack,
                                 const torch::Tensor& src,
                                 std::vector<PagedKVCache>& cache,
                                 const std::vector<int64_t>& seq_ids,
                                 const torch::Tensor& cu_seqlens,
                                 const char* fix);

/// `TransformerDecoderImpl::forward_paged` of `decoder`; `fix` as above.
torch::Tensor decoder_paged_step(TransformerDecoderImpl& decoder,
                                 const torch::Tensor& tgt,
                                 const torch::Tensor& memory,
                                 std::vector<PagedKVCache>& self_cache,
                                 std::vector<PagedKVCache>& cross_cache,
                                 const std::vector<int64_t>& seq_ids,
                                 const torch::Tensor& cu_seqlens,
                                 const torch::Tensor& cu_seqlens_memory,
                                 const char* fix);

}  // namespace detail
}  // namespace mha
