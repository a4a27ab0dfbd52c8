// mha::PagedKVCache: one layer's key and value pool over a block manager
// (cache/paged_block_manager.h), its own or a stack's (PagedStackCache). Its
// constructors read the module: src/module/module_caches.cpp.

#include "mha/paged_kv_cache.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "cache/paged_kv_cache_state.h"

namespace mha {

using torch::Tensor;

namespace detail {

PagedKVCacheState& paged_kv_cache_state(PagedKVCache& cache) { return *cache.state_; }

void PagedKVCacheState::copy_blocks(const std::vector<BlockCopy>& copies) {
  const int64_t size = blocks->block_size();
  for (const BlockCopy& copy : copies) {
    for (Tensor* pool : {&keys, &values}) {  // (block_size, H, hd) each
      pool->narrow(0, copy.to * size, size).copy_(pool->narrow(0, copy.from * size, size));
    }
  }
}

void PagedKVCacheState::write(const Tensor& new_rows, const Tensor& k, const Tensor& v) {
  if (!k.defined() || k.size(0) == 0) return;
  keys.index_copy_(0, new_rows, k);  // (rows, H, hd) into the pool's rows
  values.index_copy_(0, new_rows, v);
}

std::pair<Tensor, Tensor> PagedKVCacheState::read(int64_t id) const {
  const Tensor& rows = blocks->rows(id);  // (S,)
  // (S, H, hd) -> (1, H, S, hd)
  return {keys.index_select(0, rows).transpose(0, 1).unsqueeze(0),
          values.index_select(0, rows).transpose(0, 1).unsqueeze(0)};
}

}  // namespace detail

PagedKVCache::PagedKVCache(PagedKVCache&&) noexcept = default;
PagedKVCache& PagedKVCache::operator=(PagedKVCache&&) noexcept = default;
PagedKVCache::~PagedKVCache() = default;

bool PagedKVCache::is_static() const { return state_->is_static; }

bool PagedKVCache::shares_blocks_with(const PagedKVCache& other) const {
  return state_->blocks == other.state_->blocks;
}

int64_t PagedKVCache::memory_bytes() const {
  return static_cast<int64_t>(state_->keys.nbytes() + state_->values.nbytes());
}

int64_t PagedKVCache::used_bytes() const {
  const int64_t blocks = num_blocks() - num_free_blocks();
  return num_blocks() == 0 ? 0 : memory_bytes() / num_blocks() * blocks;
}

}  // namespace mha
