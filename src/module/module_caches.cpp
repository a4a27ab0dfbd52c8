// The caches' operations that read a module (its heads, dtype, device, extra
// key rows): PagedKVCache's constructors and its options for a memory cap, and
// a KVCache written as a forward_cached call's key/value source. The stores
// themselves (src/cache/) know no module.

#include "module/module_caches.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "attention/projector.h"
#include "cache/kv_cache_state.h"
#include "cache/paged_kv_cache_state.h"
#include "mha/kv_cache.h"
#include "mha/multihead_attention.h"
#include "mha/paged_kv_cache.h"

namespace mha {

using torch::Tensor;

namespace {

/// Bytes of one block's keys and values for `module`.
int64_t block_bytes(const MultiheadAttentionImpl& module, int64_t block_size) {
  const Tensor& param = detail::Projector::first_weight(module);
  return 2 * block_size * module.options.embed_dim() *
         static_cast<int64_t>(c10::elementSize(param.scalar_type()));
}

/// The block tables `options` asks for, checked.
std::shared_ptr<detail::PagedBlockManager> make_block_manager(const PagedKVCacheOptions& options) {
  TORCH_CHECK_VALUE(options.block_size() > 0, "expected block_size > 0, but got ",
                    options.block_size());
  TORCH_CHECK_VALUE(options.num_blocks() >= 0, "expected num_blocks >= 0, but got ",
                    options.num_blocks());
  return std::make_shared<detail::PagedBlockManager>(options.num_blocks(), options.block_size());
}

}  // namespace

PagedKVCacheOptions PagedKVCacheOptions::for_bytes(const MultiheadAttentionImpl& module,
                                                   int64_t memory_bytes,
                                                   int64_t block_size) {
  TORCH_CHECK_VALUE(block_size > 0, "expected block_size > 0, but got ", block_size);
  return PagedKVCacheOptions(memory_bytes / block_bytes(module, block_size), block_size);
}

PagedKVCache::PagedKVCache(const MultiheadAttentionImpl& module, const PagedKVCacheOptions& options)
    : PagedKVCache(module, options, make_block_manager(options)) {}

PagedKVCache::PagedKVCache(const MultiheadAttentionImpl& module,
                           const PagedKVCacheOptions& options,
                           std::shared_ptr<detail::PagedBlockManager> blocks)
    : PagedSequences(blocks.get()), state_(std::make_unique<detail::PagedKVCacheState>()) {
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

std::vector<PagedKVCache> detail::caches_over_one_table(
    const std::vector<const MultiheadAttentionImpl*>& modules, const PagedKVCacheOptions& options) {
  TORCH_CHECK_VALUE(!modules.empty(), "PagedStackCache: expected at least one module");
  for (size_t i = 0; i < modules.size(); ++i) {
    TORCH_CHECK_VALUE(modules[i] != nullptr, "PagedStackCache: expected modules[", i,
                      "] to be a module, but got nullptr");
  }
  const auto blocks = make_block_manager(options);
  std::vector<PagedKVCache> caches;
  for (const MultiheadAttentionImpl* module : modules) {
    caches.push_back(PagedKVCache(*module, options, blocks));
  }
  return caches;
}

namespace detail {

int64_t extra_key_rows(const MultiheadAttentionImpl& module) {
  return (module.bias_k.defined() ? 1 : 0) + (module.options.add_zero_attn() ? 1 : 0);
}

std::pair<Tensor, Tensor> cache_key_values(KVCacheState& state,
                                           const MultiheadAttentionImpl& module,
                                           const Tensor& k,
                                           const Tensor& v,
                                           int64_t total_len) {
  if (k.defined()) {
    const auto& o = module.options;
    const Tensor param = Projector::first_weight(module);
    const auto buffer_options = at::TensorOptions(param.scalar_type()).device(param.device());
    // k: (N, H, L, hd)
    const CacheLayout layout{k.size(0), o.num_heads(), k.size(-1), extra_key_rows(module)};
    reserve(state, layout, buffer_options, total_len);
    append(state, k, v, module.bias_k, module.bias_v, o.add_zero_attn());
    state.owner = &module;
    state.filled = state.is_static;
  }
  return cached_views(state);  // (N, H, S + extra, hd)
}

}  // namespace detail
}  // namespace mha
