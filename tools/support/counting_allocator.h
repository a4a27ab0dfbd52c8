#pragma once

// A CPU allocator that forwards to LibTorch's and counts the bytes in use, so
// a benchmark can report the peak memory one forward call allocates. It is
// installed only around the measured call (`measure_peak_bytes`), so timings
// run on the plain allocator.

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

namespace mha {
namespace support {

class CountingAllocator final : public c10::Allocator {
 public:
  /// Each DataPtr's context is its data pointer, as `Allocator::raw_allocate`
  /// requires (oneDNN allocates through it); the size and LibTorch's deleter
  /// are found again by that pointer when it is freed.
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DataPtr inner = base_->allocate(nbytes);
    void* data = inner.get();
    if (data == nullptr) return inner;  // nothing to count (nbytes == 0)
    TORCH_INTERNAL_ASSERT(inner.get_context() == data,
                          "CountingAllocator needs a base allocator whose context is its data");
    const Block block{static_cast<int64_t>(nbytes), counts_, inner.get_deleter()};
    inner.release_context();  // freed by `release`, through block.free
    {
      const std::lock_guard<std::mutex> lock(blocks_mutex());
      auto [it, inserted] = blocks().emplace(data, block);
      if (!inserted) {  // a block raw_deallocate'd by the base allocator, after uninstalling
        it->second.counts->current.fetch_sub(it->second.nbytes);
        it->second = block;
      }
    }
    const int64_t now = counts_->current.fetch_add(block.nbytes) + block.nbytes;
    int64_t peak = counts_->peak.load();
    while (now > peak && !counts_->peak.compare_exchange_weak(peak, now)) {
    }
    return {data, data, &release, inner.device()};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  /// Runs `fn` with this allocator installed and returns the peak bytes
  /// allocated (and not yet freed) while it ran, its result included.
  template <typename Fn>
  int64_t measure_peak_bytes(Fn&& fn) {
    base_ = c10::GetCPUAllocator();
    base_raw_deleter() = base_->raw_deleter();
    counts_->current = 0;
    counts_->peak = 0;
    c10::SetCPUAllocator(this, kPriority);
    try {
      std::forward<Fn>(fn)();
    } catch (...) {
      c10::SetCPUAllocator(base_, kPriority);
      throw;
    }
    c10::SetCPUAllocator(base_, kPriority);
    return counts_->peak.load();
  }

 private:
  static constexpr uint8_t kPriority = 100;

  /// The bytes in use and their peak; shared with the live blocks, which may
  /// be freed after their allocator is gone.
  struct Counts {
    std::atomic<int64_t> current{0};
    std::atomic<int64_t> peak{0};
  };

  /// A live allocation: its size, its counts, and the base allocator's deleter.
  struct Block {
    int64_t nbytes;
    std::shared_ptr<Counts> counts;
    c10::DeleterFnPtr free;
  };

  /// Every counting allocator's live blocks, by data pointer.
  static std::unordered_map<void*, Block>& blocks() {
    static auto* const map = new std::unordered_map<void*, Block>();  // used until exit
    return *map;
  }
  static std::mutex& blocks_mutex() {
    static auto* const mutex = new std::mutex();
    return *mutex;
  }
  /// The base allocator's raw deleter, for memory it allocated before this
  /// allocator was installed and that `raw_deallocate` frees through this one.
  static c10::DeleterFnPtr& base_raw_deleter() {
    static c10::DeleterFnPtr deleter = nullptr;
    return deleter;
  }

  static void release(void* data) {
    std::optional<Block> block;
    {
      const std::lock_guard<std::mutex> lock(blocks_mutex());
      auto it = blocks().find(data);
      if (it != blocks().end()) {
        block = it->second;
        blocks().erase(it);
      }
    }
    if (!block) {
      base_raw_deleter()(data);
      return;
    }
    block->counts->current.fetch_sub(block->nbytes);
    block->free(data);
  }

  c10::Allocator* base_ = nullptr;
  std::shared_ptr<Counts> counts_ = std::make_shared<Counts>();
};

}  // namespace support
}  // namespace mha
