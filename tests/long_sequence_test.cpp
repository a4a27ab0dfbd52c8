// A long sequence: (N=1, L=16384, E=512, 8 heads), need_weights=false, in eval
// under no_grad, must complete with less than 1 GB of extra memory, i.e.
// without the (N, H, L, S) scores (8 GiB in float32 here). Two measures:
// - peak bytes held through LibTorch's CPU allocator during the call (a
//   counting wrapper installed with c10::SetCPUAllocator), which is where every
//   ATen tensor of the call comes from;
// - peak resident memory (VmHWM of /proc/self/status, its high-water mark
//   reset first through /proc/self/clear_refs) above the resident size before
//   the call, which also sees memory allocated outside c10 (BLAS, OpenMP).
// Both layouts are checked: sequence-first (Python's slow path, SDPA) and
// batch-first self-attention (what Python sends to its native fast path).

#include "support.h"

#include <mha/multihead_attention.h>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>

namespace {

using mha::MultiheadAttention;
using mha::MultiheadAttentionOptions;
using torch::Tensor;

constexpr int64_t kLength = 16384;
constexpr int64_t kEmbedDim = 512;
constexpr int64_t kHeads = 8;
constexpr int64_t kOneGB = int64_t{1} << 30;

/// Forwards to LibTorch's CPU allocator and counts the bytes in use and their peak.
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

  /// Peak bytes allocated and not yet freed while `fn` ran (its result included).
  template <typename Fn>
  int64_t peak_bytes(Fn&& fn) {
    base_ = c10::GetCPUAllocator();
    current_ = 0;
    peak_ = 0;
    c10::SetCPUAllocator(this, kPriority);
    try {
      fn();
    } catch (...) {
      c10::SetCPUAllocator(base_, kPriority);
      throw;
    }
    c10::SetCPUAllocator(base_, kPriority);
    return peak_.load();
  }

 private:
  static constexpr uint8_t kPriority = 200;
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

/// A field of /proc/self/status in bytes (e.g. "VmRSS", "VmHWM"); -1 if absent.
int64_t status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  }
  return -1;
}

/// Resets VmHWM to the current resident size; false where the kernel does not allow it.
bool reset_peak_rss() {
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5";
  clear_refs.flush();
  return static_cast<bool>(clear_refs);
}

struct Measured {
  int64_t allocator_peak = 0;
  int64_t rss_extra = -1;  // -1: not measurable here
  double seconds = 0;
};

Measured measure(MultiheadAttention& m, const Tensor& x, Tensor& out) {
  torch::NoGradGuard no_grad;
  // Static: tensors allocated through it (the output) outlive this call and
  // report their release to it.
  static CountingAllocator counting;
  Measured result;
  const int64_t rss_before = status_bytes("VmRSS");
  const bool rss_ok = reset_peak_rss() && rss_before > 0;
  const auto start = std::chrono::steady_clock::now();
  result.allocator_peak = counting.peak_bytes([&] {
    out = std::get<0>(m->forward(x, x, x, /*key_padding_mask=*/{}, /*need_weights=*/false));
  });
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (rss_ok) result.rss_extra = status_bytes("VmHWM") - rss_before;
  return result;
}

void report(const char* what, const Measured& r) {
  std::cout << "long sequence " << what << ": N=1 L=" << kLength << " E=" << kEmbedDim
            << " H=" << kHeads << ", " << r.seconds << " s, peak allocator bytes "
            << r.allocator_peak / (1024.0 * 1024.0) << " MiB, peak RSS above start "
            << (r.rss_extra < 0 ? std::string("n/a")
                                : std::to_string(r.rss_extra / (1024 * 1024)) + " MiB")
            << "\n";
}

void expect_under_one_gb(const Measured& r) {
  EXPECT_LT(r.allocator_peak, kOneGB) << "an L x S allocation?";
  if (r.rss_extra >= 0) EXPECT_LT(r.rss_extra, kOneGB);
}

struct LongSequence : mha::test::SeedingFixture {};

TEST_F(LongSequence, SequenceFirstWithoutWeightsUnderOneGB) {
  MultiheadAttention m(kEmbedDim, kHeads);
  m->eval();
  const Tensor x = torch::randn({kLength, 1, kEmbedDim});  // (L, N, E)
  Tensor out;
  const Measured r = measure(m, x, out);
  report("sequence-first (SDPA path)", r);
  EXPECT_EQ(out.sizes(), x.sizes());
  EXPECT_TRUE(out.isfinite().all().item<bool>());
  expect_under_one_gb(r);
}

TEST_F(LongSequence, BatchFirstSelfAttentionWithoutWeightsUnderOneGB) {
  MultiheadAttention m(MultiheadAttentionOptions(kEmbedDim, kHeads).batch_first(true));
  m->eval();
  const Tensor x = torch::randn({1, kLength, kEmbedDim});  // (N, L, E)
  Tensor out;
  const Measured r = measure(m, x, out);
  report("batch-first self-attention (Python's fast-path case)", r);
  EXPECT_EQ(out.sizes(), x.sizes());
  EXPECT_TRUE(out.isfinite().all().item<bool>());
  expect_under_one_gb(r);
}

}  // namespace
