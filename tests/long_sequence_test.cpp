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
// With averaged weights (N=1, L=2048), the fast path must hold at most a
// quarter of the allocator bytes LibTorch's MultiheadAttention holds for the
// same call: no (N, H, L, S) probabilities.

#include <mha/multihead_attention.h>
#include <torch/nn/modules/activation.h>

#include <chrono>
#include <fstream>
#include <iostream>

#include "counting_allocator.h"
#include "support.h"

namespace {

using mha::MultiheadAttention;
using mha::MultiheadAttentionOptions;
using torch::Tensor;

constexpr int64_t kLength = 16384;
constexpr int64_t kEmbedDim = 512;
constexpr int64_t kHeads = 8;
constexpr int64_t kOneGB = int64_t{1} << 30;

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
  static mha::support::CountingAllocator counting;
  Measured result;
  const int64_t rss_before = status_bytes("VmRSS");
  const bool rss_ok = reset_peak_rss() && rss_before > 0;
  const auto start = std::chrono::steady_clock::now();
  result.allocator_peak = counting.measure_peak_bytes([&] {
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
  if (r.rss_extra >= 0) {
    EXPECT_LT(r.rss_extra, kOneGB);
  }
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

TEST_F(LongSequence, AveragedWeightsHoldAQuarterOfLibTorchsMemory) {
  constexpr int64_t kWeightsLength = 2048;
  torch::NoGradGuard no_grad;
  MultiheadAttention ours(MultiheadAttentionOptions(kEmbedDim, kHeads).batch_first(true));
  torch::nn::MultiheadAttention libtorch(torch::nn::MultiheadAttentionOptions(kEmbedDim, kHeads));
  ours->eval();
  libtorch->eval();
  const Tensor x = torch::randn({1, kWeightsLength, kEmbedDim});  // (N, L, E)
  const Tensor x_seq = x.transpose(0, 1).contiguous();            // (L, N, E) for LibTorch
  static mha::support::CountingAllocator counting;
  Tensor weights, libtorch_weights;
  const int64_t ours_peak =
      counting.measure_peak_bytes([&] { weights = std::get<1>(ours(x, x, x)); });
  const int64_t libtorch_peak = counting.measure_peak_bytes(
      [&] { libtorch_weights = std::get<1>(libtorch(x_seq, x_seq, x_seq)); });
  std::cout << "averaged weights, N=1 L=" << kWeightsLength << ": peak allocator bytes ours "
            << ours_peak / (1024.0 * 1024.0) << " MiB, LibTorch's "
            << libtorch_peak / (1024.0 * 1024.0) << " MiB\n";
  EXPECT_EQ(weights.sizes(), (std::vector<int64_t>{1, kWeightsLength, kWeightsLength}));
  EXPECT_LE(4 * ours_peak, libtorch_peak);
}

}  // namespace
