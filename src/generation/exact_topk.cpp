#include "generation/exact_topk.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <atomic>

namespace mha {
namespace detail {
namespace {

constexpr int64_t kMaxK = 64;
constexpr int64_t kBlock = 16;

/// The k + 1 largest of a row, in descending order (ties in arrival order).
struct RowTop {
  std::array<float, kMaxK + 1> values;
  std::array<int64_t, kMaxK + 1> indices;
  int64_t size = 0;
  int64_t keep = 0;
  bool nan = false;

  /// Takes `x` at `index` if it is among the largest so far.
  void offer(float x, int64_t index) {
    if (x != x) {
      nan = true;
      return;
    }
    if (size == keep && !(x > values[keep - 1])) {
      return;
    }
    int64_t p = size < keep ? size++ : keep - 1;
    for (; p > 0 && values[p - 1] < x; --p) {
      values[p] = values[p - 1];
      indices[p] = indices[p - 1];
    }
    values[p] = x;
    indices[p] = index;
  }

  /// Whether the k + 1 kept values are strictly descending (no NaN seen).
  bool unique() const {
    if (nan || size < keep) return false;
    for (int64_t i = 0; i + 1 < keep; ++i) {
      if (!(values[i] > values[i + 1])) return false;
    }
    return true;
  }
};

/// Whether every value of `block` (kBlock of them) is <= `threshold` (a NaN
/// is not): a branch-free test the compiler vectorizes.
bool all_at_most(const float* block, float threshold) {
  int below = 0;
  for (int64_t i = 0; i < kBlock; ++i) below += block[i] <= threshold ? 1 : 0;
  return below == kBlock;
}

/// The top k + 1 of `row` (m values).
RowTop top_of_row(const float* row, int64_t m, int64_t k) {
  RowTop top;
  top.keep = k + 1;
  int64_t j = 0;
  for (; j < m; ++j) {  // fill
    if (top.size == top.keep) break;
    top.offer(row[j], j);
  }
  for (; j + kBlock <= m; j += kBlock) {
    if (top.size == top.keep && all_at_most(row + j, top.values[top.keep - 1])) continue;
    for (int64_t i = 0; i < kBlock; ++i) top.offer(row[j + i], j + i);
  }
  for (; j < m; ++j) top.offer(row[j], j);
  return top;
}

}  // namespace

std::tuple<torch::Tensor, torch::Tensor> exact_topk(const torch::Tensor& scores, int64_t k) {
  if (scores.scalar_type() != at::kFloat || !scores.device().is_cpu() || scores.dim() != 2 ||
      k < 1 || k > kMaxK || k >= scores.size(1)) {
    return at::topk(scores, k);
  }
  const torch::Tensor x = scores.contiguous();  // (N, M)
  const int64_t rows = x.size(0), m = x.size(1);
  torch::Tensor values = at::empty({rows, k}, x.options());                    // (N, k)
  torch::Tensor indices = at::empty({rows, k}, x.options().dtype(at::kLong));  // (N, k)
  const float* in = x.const_data_ptr<float>();
  float* out_values = values.data_ptr<float>();
  int64_t* out_indices = indices.data_ptr<int64_t>();
  std::atomic<bool> unique{true};
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const RowTop top = top_of_row(in + r * m, m, k);
      if (!top.unique()) {
        unique = false;
        return;
      }
      std::copy_n(top.values.begin(), k, out_values + r * k);
      std::copy_n(top.indices.begin(), k, out_indices + r * k);
    }
  });
  if (!unique) {
    return at::topk(scores, k);
  }
  return {values, indices};
}

}  // namespace detail
}  // namespace mha
