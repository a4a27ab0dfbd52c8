// mha::PagedStackCache: a stack's per-layer pools over one block table
// (PagedKVCache::for_layers); every sequence operation acts on the table once.

#include "mha/paged_stack_cache.h"

#include "common/layer_index.h"

namespace mha {

PagedStackCache::PagedStackCache(const std::vector<const MultiheadAttentionImpl*>& modules,
                                 const PagedKVCacheOptions& options)
    : layers_(PagedKVCache::for_layers(modules, options)) {}

// Every layer's cache shares the table: the first one speaks for all.
int64_t PagedStackCache::add_sequence() { return layers_.front().add_sequence(); }

int64_t PagedStackCache::fork(int64_t id) { return layers_.front().fork(id); }

void PagedStackCache::release(int64_t id) { layers_.front().release(id); }

bool PagedStackCache::contains(int64_t id) const { return layers_.front().contains(id); }

std::vector<int64_t> PagedStackCache::sequence_ids() const {
  return layers_.front().sequence_ids();
}

int64_t PagedStackCache::length(int64_t id) const { return layers_.front().length(id); }

int64_t PagedStackCache::num_free_blocks() const { return layers_.front().num_free_blocks(); }

int64_t PagedStackCache::num_blocks() const { return layers_.front().num_blocks(); }

int64_t PagedStackCache::block_size() const { return layers_.front().block_size(); }

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
