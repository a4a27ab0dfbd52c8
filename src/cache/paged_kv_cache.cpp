// mha::PagedKVCache: the block pool, block tables, fork and copy on write.

#include "mha/paged_kv_cache.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "attention/projector.h"
#include "cache/paged_kv_cache_state.h"
#include "mha/multihead_attention.h"

namespace mha {

using torch::Tensor;

namespace {

int64_t blocks_for(int64_t positions, int64_t block_size) {
  return (positions + block_size - 1) / block_size;
}

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

const PagedKVCacheState::Sequence& PagedKVCacheState::sequence(int64_t id) const {
  const auto it = sequences.find(id);
  if (it == sequences.end()) {
    std::vector<int64_t> known;
    for (const auto& entry : sequences) known.push_back(entry.first);
    TORCH_CHECK_INDEX(false, fmt::format("unknown sequence id {}; the cache holds {}", id,
                                         known.empty() ? "none" : fmt::format("{}", known)));
  }
  return it->second;
}

void PagedKVCacheState::check_room(const std::vector<int64_t>& ids,
                                   const std::vector<int64_t>& new_positions,
                                   const char* fix) const {
  std::set<int64_t> seen;
  std::map<int64_t, int64_t>
      tail_holders;  // a shared tail block -> its holders as grow() sees them
  int64_t needed = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    TORCH_CHECK_VALUE(seen.insert(ids[i]).second,
                      fmt::format("expected distinct sequence ids, but {} is repeated", ids[i]));
    const Sequence& s = sequence(ids[i]);
    if (new_positions[i] == 0) continue;
    needed +=
        blocks_for(s.length + new_positions[i], block_size) - static_cast<int64_t>(s.blocks.size());
    if (s.length % block_size != 0) {  // writes into its tail block: a copy while it is shared
      int64_t& holders =
          tail_holders.emplace(s.blocks.back(), refcount[s.blocks.back()]).first->second;
      if (holders > 1) {
        ++needed;
        --holders;
      }
    }
  }
  TORCH_CHECK(needed <= static_cast<int64_t>(free.size()),
              fmt::format("out of blocks: the call needs {} new blocks of {} positions, and {} of "
                          "{} are free; {}",
                          needed, block_size, free.size(), num_blocks(), fix));
}

int64_t PagedKVCacheState::take_block() {
  TORCH_INTERNAL_ASSERT(!free.empty(), "take_block after check_room");
  const int64_t block = free.back();
  free.pop_back();
  refcount[block] = 1;
  return block;
}

void PagedKVCacheState::drop_block(int64_t block) {
  if (--refcount[block] == 0) free.push_back(block);
}

Tensor PagedKVCacheState::grow(int64_t id, int64_t new_positions) {
  Sequence& s = sequences.at(id);
  if (new_positions > 0 && s.length % block_size != 0 && refcount[s.blocks.back()] > 1) {
    // Copy on write: the tail block is shared with a fork; this sequence gets its own copy.
    const int64_t shared = s.blocks.back(), own = take_block();
    for (Tensor* pool : {&keys, &values}) {
      pool->narrow(0, own * block_size, block_size)
          .copy_(pool->narrow(0, shared * block_size, block_size));
    }
    drop_block(shared);
    s.blocks.back() = own;
  }
  s.length += new_positions;
  while (static_cast<int64_t>(s.blocks.size()) < blocks_for(s.length, block_size)) {
    s.blocks.push_back(take_block());
  }
  // position p -> row blocks[p / block_size] * block_size + p % block_size
  const Tensor blocks = torch::tensor(s.blocks, torch::kLong);
  const Tensor rows = (blocks.unsqueeze(1) * block_size +
                       torch::arange(block_size, torch::kLong).unsqueeze(0))  // (blocks, size)
                          .flatten();
  return rows.narrow(0, 0, s.length);
}

std::pair<Tensor, Tensor> PagedKVCacheState::append_and_read(int64_t id,
                                                             const Tensor& k,
                                                             const Tensor& v) {
  const int64_t new_positions = k.defined() ? k.size(0) : 0;
  const Tensor rows = grow(id, new_positions);  // (S,), the new positions last
  if (new_positions > 0) {
    const Tensor new_rows = rows.narrow(0, rows.size(0) - new_positions, new_positions);
    keys.index_copy_(0, new_rows, k);
    values.index_copy_(0, new_rows, v);
  }
  // (S, H, hd) -> (1, H, S, hd)
  return {keys.index_select(0, rows).transpose(0, 1).unsqueeze(0),
          values.index_select(0, rows).transpose(0, 1).unsqueeze(0)};
}

}  // namespace detail

PagedKVCache::PagedKVCache(const MultiheadAttentionImpl& module, const PagedKVCacheOptions& options)
    : state_(std::make_unique<detail::PagedKVCacheState>()) {
  TORCH_CHECK_VALUE(options.block_size() > 0, "expected block_size > 0, but got ",
                    options.block_size());
  TORCH_CHECK_VALUE(options.num_blocks() >= 0, "expected num_blocks >= 0, but got ",
                    options.num_blocks());
  const Tensor& param = detail::Projector::first_weight(module);
  const int64_t heads = module.options.num_heads();
  const int64_t rows = options.num_blocks() * options.block_size();
  auto& s = *state_;
  s.owner = &module;
  s.block_size = options.block_size();
  s.is_static = options.static_kv();
  s.keys = at::zeros({rows, heads, module.options.embed_dim() / heads}, param.options());
  s.values = at::zeros_like(s.keys);
  s.refcount.assign(options.num_blocks(), 0);
  for (int64_t b = options.num_blocks() - 1; b >= 0; --b) s.free.push_back(b);
}

PagedKVCache::PagedKVCache(PagedKVCache&&) noexcept = default;
PagedKVCache& PagedKVCache::operator=(PagedKVCache&&) noexcept = default;
PagedKVCache::~PagedKVCache() = default;

int64_t PagedKVCache::add_sequence() {
  const int64_t id = state_->next_id++;
  state_->sequences.emplace(id, detail::PagedKVCacheState::Sequence());
  return id;
}

int64_t PagedKVCache::length(int64_t id) const { return state_->sequence(id).length; }

void PagedKVCache::release(int64_t id) {
  for (const int64_t block : state_->sequence(id).blocks) state_->drop_block(block);
  state_->sequences.erase(id);
}

int64_t PagedKVCache::fork(int64_t id) {
  detail::PagedKVCacheState::Sequence copy = state_->sequence(id);
  for (const int64_t block : copy.blocks) ++state_->refcount[block];
  const int64_t new_id = state_->next_id++;
  state_->sequences.emplace(new_id, std::move(copy));
  return new_id;
}

bool PagedKVCache::contains(int64_t id) const { return state_->sequences.count(id) != 0; }

std::vector<int64_t> PagedKVCache::sequence_ids() const {
  std::vector<int64_t> ids;
  for (const auto& entry : state_->sequences) ids.push_back(entry.first);
  return ids;
}

int64_t PagedKVCache::num_free_blocks() const { return static_cast<int64_t>(state_->free.size()); }

int64_t PagedKVCache::num_blocks() const { return state_->num_blocks(); }

bool PagedKVCache::is_static() const { return state_->is_static; }

int64_t PagedKVCache::block_size() const { return state_->block_size; }

int64_t PagedKVCache::memory_bytes() const {
  return static_cast<int64_t>(state_->keys.nbytes() + state_->values.nbytes());
}

int64_t PagedKVCache::used_bytes() const {
  const int64_t blocks = num_blocks() - num_free_blocks();
  return num_blocks() == 0 ? 0 : memory_bytes() / num_blocks() * blocks;
}

}  // namespace mha
