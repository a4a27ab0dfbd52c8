#pragma once

// A CPU allocator that forwards to LibTorch's and counts the bytes in use, so
// a benchmark can report the peak memory one forward call allocates. It is
// installed only around the measured call (`measure_peak_bytes`), so timings
// run on the plain allocator.

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>

namespace mha {
namespace support {

class CountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DataPtr inner = base_->allocate(nbytes);
    void* data = inner.get();
    const c10::Device device = inner.device();
    auto* context = new Context{std::move(inner), static_cast<int64_t>(nbytes), this};
    const int64_t now = current_.fetch_add(context->nbytes) + context->nbytes;
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return {data, context, &release, device};
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  /// Runs `fn` with this allocator installed and returns the peak bytes
  /// allocated (and not yet freed) while it ran, its result included.
  template <typename Fn>
  int64_t measure_peak_bytes(Fn&& fn) {
    base_ = c10::GetCPUAllocator();
    current_ = 0;
    peak_ = 0;
    c10::SetCPUAllocator(this, kPriority);
    try {
      std::forward<Fn>(fn)();
    } catch (...) {
      c10::SetCPUAllocator(base_, kPriority);
      throw;
    }
    c10::SetCPUAllocator(base_, kPriority);
    return peak_.load();
  }

 private:
  static constexpr uint8_t kPriority = 100;

  struct Context {
    c10::DataPtr inner;  // frees through LibTorch's allocator when destroyed
    int64_t nbytes;
    CountingAllocator* owner;
  };

  static void release(void* ptr) {
    auto* context = static_cast<Context*>(ptr);
    context->owner->current_.fetch_sub(context->nbytes);
    delete context;
  }

  c10::Allocator* base_ = nullptr;
  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
};

}  // namespace support
}  // namespace mha
