// Run by scripts/tp_run.sh with 2 ranks (CI; 1 or 4 by hand, docs/scaling.md):
// each rank's peak CPU bytes (mha::support::CountingAllocator) while it builds
// its shard of a whole E=2048, H=16 layer and while it loads its shard from a
// .safetensors file and a torch.save archive of the whole layer, beside the
// single-process module's (rank 0), and the bounds: the default construction,
// the exact_init one and the safetensors load take at most (1/p + 0.1) of the
// whole layer's parameter bytes (0.6x at p = 2), the torch.save load at most
// that plus the largest tensor. Also checks that the loaded shards are the
// whole module's slices; the peak of a save is printed. Usage: mha_tp_shard_memory [EMBED_DIM
// NUM_HEADS]

#include <fmt/format.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "counting_allocator.h"
#include "mha/state_dict.h"
#include "mha/tensor_parallel.h"
#include "tp_support.h"

namespace {

using mha::tp_test::barrier;
using mha::tp_test::group;

/// One measured step: its peak bytes and the most it may take (0: unbounded).
struct Step {
  std::string what;
  int64_t peak;
  int64_t bound;
};

std::string megabytes(int64_t bytes) { return fmt::format("{:.1f} MB", bytes / 1e6); }

/// Prints the steps against `whole` bytes; false when one exceeds its bound.
bool report(const std::string& who, const std::vector<Step>& steps, int64_t whole) {
  bool ok = true;
  for (const auto& step : steps) {
    const bool within = step.bound == 0 || step.peak <= step.bound;
    ok = ok && within;
    std::cout << fmt::format("{}: {:<28} peak {:>9} ({:.3f}x the layer){}", who, step.what,
                             megabytes(step.peak), static_cast<double>(step.peak) / whole,
                             step.bound == 0 ? ""
                                             : fmt::format(", bound {} {}", megabytes(step.bound),
                                                           within ? "PASS" : "FAIL"))
              << std::endl;
  }
  return ok;
}

/// Rank 0: the single-process module built, saved in both formats, loaded back.
std::vector<Step> single_process(mha::support::CountingAllocator& counter,
                                 const mha::MultiheadAttentionOptions& options,
                                 const std::string& safetensors,
                                 const std::string& pt) {
  mha::MultiheadAttention whole{nullptr};
  std::vector<Step> steps;
  steps.push_back({"construction",
                   counter.measure_peak_bytes([&] { whole = mha::MultiheadAttention(options); }),
                   0});
  mha::save_state_dict(whole, safetensors);
  mha::save_state_dict(whole, pt);
  for (const auto& path : {safetensors, pt}) {
    mha::MultiheadAttention target(options);
    steps.push_back({"load_state_dict " + path.substr(path.rfind('.')),
                     counter.measure_peak_bytes([&] { mha::load_state_dict(target, path); }), 0});
  }
  return steps;
}

/// Whether every parameter of `tp` equals the same rank's slice of the whole
/// module in `pt`.
bool holds_the_slices(const mha::TensorParallelMultiheadAttention& tp,
                      const mha::MultiheadAttentionOptions& options,
                      const std::string& pt) {
  mha::MultiheadAttention whole(options);
  mha::load_state_dict(whole, pt);
  mha::TensorParallelMultiheadAttention expected(options, group());
  expected->load_shard_from(*whole);
  bool same = true;
  for (const auto& p : expected->named_parameters()) {
    const bool equal = torch::equal(tp->named_parameters()[p.key()], p.value());
    if (!equal) std::cout << "FAIL: " << p.key() << " is not the whole module's slice" << std::endl;
    same = same && equal;
  }
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t E = argc > 2 ? std::atoll(argv[1]) : 2048, H = argc > 2 ? std::atoll(argv[2]) : 16;
  const auto options = mha::MultiheadAttentionOptions(E, H);
  const int rank = group()->getRank(), p = group()->getSize();
  const int64_t whole_bytes = (4 * E * E + 4 * E) * 4, largest = 3 * E * E * 4;  // float32
  const int64_t bound = static_cast<int64_t>((1.0 / p + 0.1) * static_cast<double>(whole_bytes));
  const std::string safetensors = mha::tp_test::shared_path("shard_memory.safetensors");
  const std::string pt = mha::tp_test::shared_path("shard_memory.pt");
  mha::support::CountingAllocator counter;
  bool ok = true;
  if (rank == 0) {
    std::cout << fmt::format(
                     "E={}, H={}, p={}: the whole layer's parameters take {}, its "
                     "largest tensor (in_proj_weight) {}",
                     E, H, p, megabytes(whole_bytes), megabytes(largest))
              << std::endl;
    ok = report("single process", single_process(counter, options, safetensors, pt), whole_bytes);
  }
  barrier();
  mha::TensorParallelMultiheadAttention tp{nullptr};
  std::vector<Step> steps;
  steps.push_back({"construction", counter.measure_peak_bytes([&] {
                     tp = mha::TensorParallelMultiheadAttention(options, group());
                   }),
                   bound});
  steps.push_back({"construction, exact_init", counter.measure_peak_bytes([&] {
                     mha::TensorParallelMultiheadAttention exact(
                         options, group(), mha::TensorParallelOptions().exact_init(true));
                   }),
                   bound});
  steps.push_back(
      {"load .safetensors", counter.measure_peak_bytes([&] { tp->load(safetensors); }), bound});
  const bool safetensors_ok = holds_the_slices(tp, options, pt);
  tp = mha::TensorParallelMultiheadAttention(options, group());
  steps.push_back({"load .pt", counter.measure_peak_bytes([&] { tp->load(pt); }), bound + largest});
  const std::string saved = mha::tp_test::shared_path("shard_memory_saved.safetensors");
  steps.push_back({"save .safetensors", counter.measure_peak_bytes([&] { tp->save(saved); }), 0});
  ok = report(fmt::format("rank {} of {}", rank, p), steps, whole_bytes) && ok;
  ok = safetensors_ok && holds_the_slices(tp, options, pt) && ok;
  barrier();
  if (rank == 0) {
    std::remove(safetensors.c_str());
    std::remove(pt.c_str());
    std::remove(saved.c_str());
  }
  std::cout << (ok ? "PASS" : "FAIL") << std::endl;
  return ok ? 0 : 1;
}
