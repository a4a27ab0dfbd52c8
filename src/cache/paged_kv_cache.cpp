// mha::PagedKVCache: one layer's key and value pool over a block manager
// (cache/paged_block_manager.h), its own or a stack's (for_layers).

#include "mha/paged_kv_cache.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "attention/projector.h"
#include "cache/paged_kv_cache_state.h"
#include "mha/multihead_attention.h"

namespace mha {

using torch::Tensor;

namespace {

/// Bytes of one block's keys and values for `module`.
int64_t block_bytes(const MultiheadAttentionImpl& module, int64_t block_size) {
  const Tensor& param = detail::Projector::first_weight(module);
  return 2 * block_size * module.options.embed_dim() *
         static_cast<int64_t>(c10::elementSize(param.scalar_type()));
}

}  // namespace

PagedKVCacheOptions::PagedKVCacheOptions(int64_t num_blocks, int64_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {}

PagedKVCacheOptions PagedKVCacheOptions::for_bytes(const MultiheadAttentionImpl& module,
                                                   int64_t memory_bytes,
                                                   int64_t block_size) {
  TORCH_CHECK_VALUE(block_size > 0, "expected block_size > 0, but got ", block_size);
  return PagedKVCacheOptions(memory_bytes / block_bytes(module, block_size), block_size);
}

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

namespace {

/// The block tables `options` asks for, checked.
std::shared_ptr<detail::PagedBlockManager> make_block_manager(const PagedKVCacheOptions& options) {
  TORCH_CHECK_VALUE(options.block_size() > 0, "expected block_size > 0, but got ",
                    options.block_size());
  TORCH_CHECK_VALUE(options.num_blocks() >= 0, "expected num_blocks >= 0, but got ",
                    options.num_blocks());
  return std::make_shared<detail::PagedBlockManager>(options.num_blocks(), options.block_size());
}

}  // namespace

PagedKVCache::PagedKVCache(const MultiheadAttentionImpl& module, const PagedKVCacheOptions& options)
    : PagedKVCache(module, options, make_block_manager(options)) {}

PagedKVCache::PagedKVCache(const MultiheadAttentionImpl& module,
                           const PagedKVCacheOptions& options,
                           std::shared_ptr<detail::PagedBlockManager> blocks)
    : state_(std::make_unique<detail::PagedKVCacheState>()) {
  const Tensor& param = detail::Projector::first_weight(module);
  const int64_t heads = module.options.num_heads();
  const int64_t rows = blocks->num_blocks() * blocks->block_size();
  auto& s = *state_;
  s.owner = &module;
  s.is_static = options.static_kv();
  s.keys = at::zeros({rows, heads, module.options.embed_dim() / heads}, param.options());
  s.values = at::zeros_like(s.keys);
  s.blocks = std::move(blocks);
}

std::vector<PagedKVCache> PagedKVCache::for_layers(
    const std::vector<const MultiheadAttentionImpl*>& modules, const PagedKVCacheOptions& options) {
  TORCH_CHECK_VALUE(!modules.empty(), "PagedKVCache::for_layers: expected at least one module");
  for (size_t i = 0; i < modules.size(); ++i) {
    TORCH_CHECK_VALUE(modules[i] != nullptr, "PagedKVCache::for_layers: expected modules[", i,
                      "] to be a module, but got nullptr");
  }
  const auto blocks = make_block_manager(options);
  std::vector<PagedKVCache> caches;
  for (const MultiheadAttentionImpl* module : modules) {
    caches.push_back(PagedKVCache(*module, options, blocks));
  }
  return caches;
}

PagedKVCache::PagedKVCache(PagedKVCache&&) noexcept = default;
PagedKVCache& PagedKVCache::operator=(PagedKVCache&&) noexcept = default;
PagedKVCache::~PagedKVCache() = default;

int64_t PagedKVCache::add_sequence() { return state_->blocks->add_sequence(); }

int64_t PagedKVCache::length(int64_t id) const { return state_->blocks->sequence(id).length(); }

void PagedKVCache::release(int64_t id) { state_->blocks->release(id); }

int64_t PagedKVCache::fork(int64_t id) { return state_->blocks->fork(id); }

bool PagedKVCache::contains(int64_t id) const { return state_->blocks->contains(id); }

std::vector<int64_t> PagedKVCache::sequence_ids() const { return state_->blocks->ids(); }

int64_t PagedKVCache::num_free_blocks() const { return state_->blocks->num_free_blocks(); }

int64_t PagedKVCache::num_blocks() const { return state_->blocks->num_blocks(); }

bool PagedKVCache::is_static() const { return state_->is_static; }

bool PagedKVCache::shares_blocks_with(const PagedKVCache& other) const {
  return state_->blocks == other.state_->blocks;
}

int64_t PagedKVCache::block_size() const { return state_->blocks->block_size(); }

int64_t PagedKVCache::memory_bytes() const {
  return static_cast<int64_t>(state_->keys.nbytes() + state_->values.nbytes());
}

int64_t PagedKVCache::used_bytes() const {
  const int64_t blocks = num_blocks() - num_free_blocks();
  return num_blocks() == 0 ? 0 : memory_bytes() / num_blocks() * blocks;
}

}  // namespace mha
