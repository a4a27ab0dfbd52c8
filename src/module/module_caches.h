#pragma once

// Private: a KVCache written as a forward_cached call's key/value source,
// with the module's extra key rows (src/module/module_caches.cpp).

#include <torch/types.h>

#include <cstdint>
#include <utility>

#include "cache/kv_cache_state.h"

namespace mha {

class MultiheadAttentionImpl;

namespace detail {

/// The rows a module appends after the keys: `bias_k`/`bias_v`'s and the zero row.
int64_t extra_key_rows(const MultiheadAttentionImpl& module);

/// The cache as the key/value source of a `forward_cached` call: `k`, `v`
/// (N, H, L, head_dim), the new positions (undefined for a filled static
/// cache), written with `module`'s extra rows (`bias_k`/`bias_v`, the zero row)
/// into buffers of the module's dtype and device, then the cached keys and
/// values, (N, H, length + extra, head_dim) views. `total_len`: the positions
/// after the call. The call is validated.
std::pair<torch::Tensor, torch::Tensor> cache_key_values(KVCacheState& state,
                                                         const MultiheadAttentionImpl& module,
                                                         const torch::Tensor& k,
                                                         const torch::Tensor& v,
                                                         int64_t total_len);

}  // namespace detail
}  // namespace mha
