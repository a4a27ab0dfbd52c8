// tp_bench: time per forward of tensor-parallel attention against one process,
// and the all-reduce's share. Inference (eval, no autograd, need_weights=false),
// E=1024, H=16, (N, L) in {(1, 1024), (4, 1024), (1, 4096)}.
//   one process:  tp_bench --threads T            (mha::MultiheadAttention)
//   p ranks:      scripts/tp_run.sh P tp_bench    (1 intra-op thread per rank)
// Prints one line per shape (rank 0): median ms per forward, median ms of the
// all-reduce of the (L, N, E) float32 output alone, bytes all-reduced.
// --iters K (default 5), --smoke (E=64, H=4, (2, 16), 2 iterations).

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "mha/tensor_parallel.h"

namespace {

struct Shape {
  int64_t batch, length;
};

/// Median of `iters` timed calls of `body` after one warm-up, in ms.
double median_ms(int iters, const std::function<void()>& body) {
  body();
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    body();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, iters = 5;
  bool smoke = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    if (arg == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    if (arg == "--smoke") smoke = true;
  }
  const int64_t E = smoke ? 64 : 1024, H = smoke ? 4 : 16;
  const std::vector<Shape> shapes =
      smoke ? std::vector<Shape>{{2, 16}} : std::vector<Shape>{{1, 1024}, {4, 1024}, {1, 4096}};
  if (smoke) iters = 2;
  const bool distributed = std::getenv("WORLD_SIZE") != nullptr;
  torch::set_num_threads(distributed ? 1 : threads);
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  const auto options = mha::MultiheadAttentionOptions(E, H);
  mha::MultiheadAttention whole(options);
  whole->eval();
  c10::intrusive_ptr<c10d::Backend> group;
  mha::TensorParallelMultiheadAttention tp{nullptr};
  if (distributed) {
    group = mha::process_group_from_env();
    tp = mha::TensorParallelMultiheadAttention(options, group);
    tp->load_shard_from(*whole);
    tp->eval();
  }
  const int rank = distributed ? group->getRank() : 0;
  if (rank == 0) {
    std::printf("%-14s %6s %6s %12s %14s %12s %8s\n", "config", "N", "L", "ms/forward",
                "ms/all-reduce", "MB reduced", "comm %");
  }
  for (const Shape& s : shapes) {
    const auto x = torch::randn({s.length, s.batch, E});
    if (!distributed) {
      const double ms = median_ms(iters, [&] { whole(x, x, x, torch::Tensor(), false); });
      std::printf("1p x %dt       %6ld %6ld %12.2f %14s %12s %8s\n", threads, s.batch, s.length, ms,
                  "-", "-", "-");
      continue;
    }
    const double ms = median_ms(iters, [&] { tp(x, x, x, torch::Tensor(), false); });
    auto buffer = torch::randn({s.length, s.batch, E});
    const double reduce_ms = median_ms(iters, [&] {
      std::vector<torch::Tensor> tensors{buffer};
      group->allreduce(tensors)->wait();
    });
    if (rank == 0) {
      const double mb = static_cast<double>(buffer.numel() * 4) / 1e6;
      std::printf("%dp x 1t       %6ld %6ld %12.2f %14.2f %12.2f %8.1f\n", group->getSize(),
                  s.batch, s.length, ms, reduce_ms, mb, 100.0 * reduce_ms / ms);
    }
  }
  return 0;
}
