#pragma once

// Private: a stack step over paged caches: checked for every distinct block
// table before any grows, then each table grown once, so that each layer's
// forward_paged writes its own pool at the grown rows; closed when destroyed.

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "cache/paged_block_manager.h"

namespace mha {

class PagedKVCache;

namespace detail {

class PagedStackStep {
 public:
  /// A step of the sequences `seq_ids`, in call order; nothing checked yet.
  explicit PagedStackStep(std::vector<int64_t> seq_ids);
  PagedStackStep(const PagedStackStep&) = delete;
  PagedStackStep& operator=(const PagedStackStep&) = delete;
  /// Closes the step on every table it opened (their growth stays).
  ~PagedStackStep();

  /// Adds `caches`, whose new key positions are `offsets.keys`' (a group:
  /// the self-attention caches, or the cross-attention ones): throws, nothing
  /// changed, unless each distinct block table among them has room for every
  /// sequence's new positions, a copy on write counted once per table.
  /// `fix`: what the caller can do about too few blocks. `offsets` must
  /// live until `open`.
  void check(std::vector<PagedKVCache>& caches, const PagedOffsets& offsets, const char* fix);
  /// After `check` of every group: grows each table once and opens the step.
  void open();

 private:
  std::vector<int64_t> ids_;
  /// Each distinct table, the offsets of its group, and the group's index.
  struct Table {
    std::shared_ptr<PagedBlockManager> blocks;
    const PagedOffsets* offsets;
    size_t group;
  };
  std::vector<Table> tables_;
  size_t groups_ = 0;
  bool opened_ = false;
};

}  // namespace detail
}  // namespace mha
