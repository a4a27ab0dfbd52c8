// mha::PagedStackCache: a stack's per-layer pools over one block table
// (detail::caches_over_one_table); every sequence operation acts on the table once.

#include "mha/paged_stack_cache.h"

#include <utility>

#include "cache/paged_kv_cache_state.h"
#include "common/layer_index.h"

namespace mha {

PagedStackCache::PagedStackCache(const std::vector<const MultiheadAttentionImpl*>& modules,
                                 const PagedKVCacheOptions& options)
    : PagedStackCache(detail::caches_over_one_table(modules, options)) {}

PagedStackCache::PagedStackCache(std::vector<PagedKVCache> layers)
    : PagedSequences(detail::paged_kv_cache_state(layers.front()).blocks.get()),
      layers_(std::move(layers)) {}

// Every layer holds the same kind of pool: the first one speaks for all.
bool PagedStackCache::is_static() const { return layers_.front().is_static(); }

int64_t PagedStackCache::memory_bytes() const {
  int64_t bytes = 0;
  for (const PagedKVCache& layer : layers_) bytes += layer.memory_bytes();
  return bytes;
}

int64_t PagedStackCache::used_bytes() const {
  int64_t bytes = 0;
  for (const PagedKVCache& layer : layers_) bytes += layer.used_bytes();
  return bytes;
}

PagedKVCache& PagedStackCache::layer(int64_t i) { return detail::layer_at(layers_, i); }

const PagedKVCache& PagedStackCache::layer(int64_t i) const { return detail::layer_at(layers_, i); }

std::vector<PagedKVCache>& detail::stack_layers(PagedStackCache& cache) { return cache.layers_; }

}  // namespace mha
