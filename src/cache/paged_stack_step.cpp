// detail::PagedStackStep: a stack's paged step, checked once per block table
// before any table grows, then each table grown once for all its layers.

#include "cache/paged_stack_step.h"

#include <c10/util/Exception.h>

#include "cache/paged_kv_cache_state.h"
#include "mha/paged_kv_cache.h"

namespace mha {
namespace detail {

PagedStackStep::PagedStackStep(std::vector<int64_t> seq_ids) : ids_(std::move(seq_ids)) {}

PagedStackStep::~PagedStackStep() {
  if (!opened_) return;
  for (const Table& table : tables_) table.blocks->close_step();
}

void PagedStackStep::check(std::vector<PagedKVCache>& caches,
                           const PagedOffsets& offsets,
                           const char* fix) {
  TORCH_INTERNAL_ASSERT(!opened_, "PagedStackStep::check after open");
  const size_t group = groups_++;
  const std::vector<int64_t> new_positions = new_key_positions(offsets);
  for (PagedKVCache& cache : caches) {
    const std::shared_ptr<PagedBlockManager>& blocks = paged_kv_cache_state(cache).blocks;
    bool seen = false;
    for (const Table& table : tables_) {
      if (table.blocks != blocks) continue;
      TORCH_CHECK_VALUE(table.group == group,
                        "expected the self-attention and cross-attention caches over different "
                        "block tables, but they share one");
      seen = true;
    }
    if (seen) continue;
    TORCH_CHECK(blocks->step() == nullptr,
                "a stack step is already in progress on this cache's block table");
    blocks->check_room(ids_, new_positions, fix);
    tables_.push_back({blocks, &offsets, group});
  }
}

void PagedStackStep::open() {
  TORCH_INTERNAL_ASSERT(!opened_, "PagedStackStep::open twice");
  opened_ = true;
  for (const Table& table : tables_) table.blocks->open_step(ids_, *table.offsets);
}

}  // namespace detail
}  // namespace mha
