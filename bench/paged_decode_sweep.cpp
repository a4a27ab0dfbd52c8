// paged_decode_sweep: the paged decode kernel (mha::detail::paged_decode_attention)
// against a read sweep of the same bytes. A serving step's cross-attention:
// 48 sequences of 16-128 cached positions (fixed seed), 8 heads of 64, blocks
// of 16 positions in a shuffled order, one pool per layer for 6 layers (81 MB,
// beyond this machine's caches: each call reads from memory). Per thread count
// (1, 2): the median of 15 rounds of the 6 calls, each round after a 256 MB
// write that evicts the pools, and of a sum over one float buffer of the same
// bytes; the kernel's share of the sweep's bandwidth. --hot: instead 4
// sequences (1 MB) called 200 times per round without eviction (the kernel's
// compute, from L2), on 1 thread only. Not a test; not in CI.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "attention/paged_decode/paged_decode.h"

namespace {

using mha::detail::PagedDecodeArgs;
using torch::Tensor;

constexpr int64_t kHeads = 8, kHeadDim = 64, kBlockSize = 16, kLayers = 6, kRounds = 15;

/// One layer's decode arguments: `lengths`' positions in shuffled blocks of a pool.
PagedDecodeArgs layer(const std::vector<int32_t>& lengths, std::mt19937& random) {
  int64_t blocks = 0, widest = 0;
  for (const int32_t l : lengths) {
    blocks += (l + kBlockSize - 1) / kBlockSize;
    widest = std::max<int64_t>(widest, (l + kBlockSize - 1) / kBlockSize);
  }
  std::vector<int32_t> order(blocks);
  for (int64_t b = 0; b < blocks; ++b) order[b] = static_cast<int32_t>(b);
  std::shuffle(order.begin(), order.end(), random);
  const auto n = static_cast<int64_t>(lengths.size());
  Tensor table = torch::zeros({n, widest}, torch::kInt);  // (N, max_blocks)
  int64_t next = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t b = 0; b < (lengths[i] + kBlockSize - 1) / kBlockSize; ++b) {
      table[i][b] = order[next++];
    }
  }
  return {torch::randn({n, kHeads, kHeadDim}), torch::randn({blocks, kBlockSize, kHeads, kHeadDim}),
          torch::randn({blocks, kBlockSize, kHeads, kHeadDim}), table,
          torch::tensor(lengths, torch::kInt)};
}

/// The median ms of `rounds` runs of `call`, `evict` before each.
template <typename Call, typename Evict>
double median_ms(Call&& call, Evict&& evict) {
  std::vector<double> ms;
  for (int64_t r = 0; r < kRounds; ++r) {
    evict();
    const auto start = std::chrono::steady_clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::nth_element(ms.begin(), ms.begin() + kRounds / 2, ms.end());
  return ms[kRounds / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const bool hot = argc > 1 && std::strcmp(argv[1], "--hot") == 0;
  const c10::InferenceMode inference;
  std::mt19937 random(0);
  std::vector<int32_t> lengths(hot ? 4 : 48);
  int64_t positions = 0;
  for (int32_t& l : lengths) positions += l = 16 + static_cast<int32_t>(random() % 113);
  std::vector<PagedDecodeArgs> layers;
  for (int64_t l = 0; l < (hot ? 1 : kLayers); ++l) layers.push_back(layer(lengths, random));
  const int64_t calls = hot ? 200 : 1;
  const double bytes = 2.0 * positions * kHeads * kHeadDim * 4 * static_cast<double>(layers.size());
  Tensor evicting = torch::zeros({64 << 20});  // 256 MB
  Tensor swept = torch::randn({static_cast<int64_t>(bytes / 4)});
  std::printf(
      "paged_decode_sweep%s: %zu sequences, %ld positions, %zu layer(s), %.1f MB per round\n\n"
      "| threads | kernel ms | kernel GB/s | sweep GB/s | share |\n|---|---|---|---|---|\n",
      hot ? " --hot" : "", lengths.size(), static_cast<long>(positions), layers.size(),
      bytes * static_cast<double>(calls) / 1e6);
  for (const int threads : {1, 2}) {
    if (hot && threads > 1) break;  // a 2-thread hot call is the threads' wake-up
    at::set_num_threads(threads);
    const auto evict = [&] {
      if (!hot) evicting.add_(1);
    };
    const double kernel = median_ms(
        [&] {
          for (int64_t c = 0; c < calls; ++c) {
            for (const auto& a : layers) mha::detail::paged_decode_attention(a);
          }
        },
        evict);
    const double sweep = median_ms(
        [&] {
          for (int64_t c = 0; c < calls; ++c) swept.sum();
        },
        evict);
    const double read = bytes * static_cast<double>(calls) / 1e6;  // MB
    std::printf("| %d | %.2f | %.1f | %.1f | %.2f |\n", threads, kernel, read / kernel,
                read / sweep, sweep / kernel);
  }
  return 0;
}
