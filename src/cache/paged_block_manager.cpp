// detail::PagedBlockManager: the free list, block tables, fork, copy on write
// and the stack step of mha::PagedKVCache's pools.

#include "cache/paged_block_manager.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

namespace mha {
namespace detail {

namespace {

int64_t blocks_for_positions(int64_t positions, int64_t block_size) {
  return (positions + block_size - 1) / block_size;
}

}  // namespace

PagedBlockManager::PagedBlockManager(int64_t num_blocks, int64_t block_size)
    : block_size_(block_size), refcount_(num_blocks, 0) {
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

const PagedBlockManager::Sequence& PagedBlockManager::sequence(int64_t id) const {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) {
    const std::vector<int64_t> known = ids();
    TORCH_CHECK_INDEX(false, fmt::format("unknown sequence id {}; the cache holds {}", id,
                                         known.empty() ? "none" : fmt::format("{}", known)));
  }
  return it->second;
}

std::vector<int64_t> PagedBlockManager::ids() const {
  std::vector<int64_t> result;
  for (const auto& entry : sequences_) result.push_back(entry.first);
  return result;
}

const torch::Tensor& PagedBlockManager::rows(int64_t id) const {
  auto it = rows_made_.find(id);
  if (it == rows_made_.end()) {
    it = rows_made_.emplace(id, torch::tensor(sequence(id).rows, torch::kLong)).first;  // (S,)
  }
  return it->second;
}

PagedStepTables PagedBlockManager::step_tables(const std::vector<int64_t>& ids,
                                               const std::vector<int64_t>& new_positions) const {
  const auto n = static_cast<int64_t>(ids.size());
  int64_t max_blocks = 0, new_total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    max_blocks = std::max<int64_t>(max_blocks, sequence(ids[i]).blocks.size());
    new_total += new_positions[i];
  }
  PagedStepTables t{at::zeros({n, max_blocks}, at::kInt), at::empty({n}, at::kInt),
                    at::empty({new_total}, at::kLong)};
  int32_t* table = t.block_table.data_ptr<int32_t>();
  int64_t* new_rows = t.new_rows.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const Sequence& s = sequence(ids[i]);
    std::copy(s.blocks.begin(), s.blocks.end(), table + i * max_blocks);
    t.lengths.data_ptr<int32_t>()[i] = static_cast<int32_t>(s.length());
    new_rows = std::copy(s.rows.end() - new_positions[i], s.rows.end(), new_rows);
  }
  return t;
}

int64_t PagedBlockManager::add_sequence() {
  const int64_t id = next_id_++;
  sequences_.emplace(id, Sequence());
  return id;
}

int64_t PagedBlockManager::fork(int64_t id) {
  Sequence copy = sequence(id);
  for (const int64_t block : copy.blocks) ++refcount_[block];
  const int64_t new_id = next_id_++;
  sequences_.emplace(new_id, std::move(copy));
  return new_id;
}

void PagedBlockManager::release(int64_t id) {
  for (const int64_t block : sequence(id).blocks) drop_block(block);
  sequences_.erase(id);
  rows_made_.erase(id);
}

void PagedBlockManager::check_room(const std::vector<int64_t>& ids,
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
    needed += blocks_for_positions(s.length() + new_positions[i], block_size_) -
              static_cast<int64_t>(s.blocks.size());
    if (s.length() % block_size_ != 0) {  // writes into its tail block: a copy while it is shared
      int64_t& holders =
          tail_holders.emplace(s.blocks.back(), refcount_[s.blocks.back()]).first->second;
      if (holders > 1) {
        ++needed;
        --holders;
      }
    }
  }
  TORCH_CHECK(needed <= num_free_blocks(),
              fmt::format("out of blocks: the call needs {} new blocks of {} positions, and {} of "
                          "{} are free; {}",
                          needed, block_size_, free_.size(), num_blocks(), fix));
}

int64_t PagedBlockManager::take_block() {
  TORCH_INTERNAL_ASSERT(!free_.empty(), "take_block after check_room");
  const int64_t block = free_.back();
  free_.pop_back();
  refcount_[block] = 1;
  return block;
}

void PagedBlockManager::drop_block(int64_t block) {
  if (--refcount_[block] == 0) free_.push_back(block);
}

BlockCopy PagedBlockManager::copy_tail(Sequence& s) {
  const BlockCopy copy{s.blocks.back(), take_block()};
  drop_block(copy.from);
  s.blocks.back() = copy.to;
  // The tail block's filled positions move to the copy's rows.
  const int64_t first = (static_cast<int64_t>(s.blocks.size()) - 1) * block_size_;
  for (int64_t p = first; p < s.length(); ++p) s.rows[p] = copy.to * block_size_ + p - first;
  return copy;
}

std::vector<BlockCopy> PagedBlockManager::grow(const std::vector<int64_t>& ids,
                                               const std::vector<int64_t>& new_positions) {
  std::vector<BlockCopy> copies;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (new_positions[i] == 0) continue;
    Sequence& s = sequences_.at(ids[i]);
    rows_made_.erase(ids[i]);
    if (s.length() % block_size_ != 0 && refcount_[s.blocks.back()] > 1) {
      copies.push_back(copy_tail(s));  // copy on write: the tail block is shared with a fork
    }
    for (int64_t p = s.length(); p < s.length() + new_positions[i]; ++p) {
      if (p % block_size_ == 0) s.blocks.push_back(take_block());
    }
    // position p -> row blocks[p / block_size] * block_size + p % block_size
    const int64_t end = s.length() + new_positions[i];
    for (int64_t p = s.length(); p < end; ++p) {
      s.rows.push_back(s.blocks[p / block_size_] * block_size_ + p % block_size_);
    }
  }
  return copies;
}

void PagedBlockManager::open_step(const std::vector<int64_t>& ids, const PagedOffsets& offsets) {
  TORCH_INTERNAL_ASSERT(!step_, "a stack step is already in progress on this block table");
  PagedStepRecord record;
  record.ids = ids;
  record.offsets = offsets;
  for (const int64_t id : ids) record.lengths_before.push_back(sequence(id).length());
  const std::vector<int64_t> new_positions = new_key_positions(offsets);
  record.copies = grow(ids, new_positions);
  record.tables = step_tables(ids, new_positions);
  step_ = std::move(record);
}

std::vector<int64_t> new_key_positions(const PagedOffsets& offsets) {
  std::vector<int64_t> positions;
  for (size_t i = 0; i + 1 < offsets.keys.size(); ++i) {
    positions.push_back(offsets.keys[i + 1] - offsets.keys[i]);
  }
  return positions;
}

}  // namespace detail
}  // namespace mha
