#pragma once

// Private: the checks of MultiheadAttentionImpl::forward_paged, callable
// alone, so that a layer checks both of its attention calls before either
// writes its cache.

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace mha {

class MultiheadAttentionImpl;
class PagedKVCache;

namespace detail {

/// Throws what `module.forward_paged(query, key, value, cache, seq_ids,
/// cu_seqlens, cu_seqlens_kv)` would throw before changing anything; else returns.
void check_paged_call(const MultiheadAttentionImpl& module,
                      PagedKVCache& cache,
                      const torch::Tensor& query,
                      const torch::Tensor& key,
                      const torch::Tensor& value,
                      const std::vector<int64_t>& seq_ids,
                      const torch::Tensor& cu_seqlens,
                      const torch::Tensor& cu_seqlens_kv);

}  // namespace detail
}  // namespace mha
