#pragma once

// Private: the checks of MultiheadAttentionImpl::forward_cached, before
// anything changes (the counterpart of paged_call_checks.h).

#include <cstdint>

#include "attention/attention_call.h"
#include "cache/kv_cache_state.h"

namespace mha {

class MultiheadAttentionImpl;

namespace detail {

/// Sizes of one cached call, in the caller's layout.
struct CachedCallShape {
  bool batched = true;
  bool batch_first = false;  ///< (N, L, E) layout (unbatched inputs get it too)
  int64_t bsz = 1;
  int64_t tgt_len = 0;    ///< L_new: new query positions
  int64_t total_len = 0;  ///< key positions after the call, extra rows not counted
};

/// Throws what `module.forward_cached(call..., cache)` would throw, in the
/// order it checks, before anything changes: training mode, the cache's kind
/// against the key and value given, the module, dtype and device the cache
/// was filled with, ranks, dtypes, devices, feature sizes, batch and sequence
/// sizes against each other, the cache and its capacity, and both masks'
/// shapes. Returns the call's sizes.
CachedCallShape check_cached_call(const MultiheadAttentionImpl& module,
                                  const KVCacheState& cache,
                                  const AttentionCall& call);

/// The sizes of a call `check_cached_call` passed (it checks nothing): what
/// `forward_cached` reads of a call its layer or stack checked.
CachedCallShape cached_call_shape(const MultiheadAttentionImpl& module,
                                  const KVCacheState& cache,
                                  const AttentionCall& call);

/// `check_cached_call` of `module.forward_cached(query, key_value, key_value,
/// cache, key_padding_mask)`: what a layer or stack checks of each of its
/// attention calls before the first one writes its cache (the attention's
/// input has the shape, dtype and device of the layer's).
void check_cached_attention(const MultiheadAttentionImpl& module,
                            KVCache& cache,
                            const torch::Tensor& query,
                            const torch::Tensor& key_value,
                            const torch::Tensor& key_padding_mask);

}  // namespace detail
}  // namespace mha
