#include "generation/exact_topk.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

namespace mha {
namespace detail {
namespace {

constexpr int64_t kMaxK = 64;
constexpr int64_t kBlock = 16;

/// ATen's entry of a row in its partial sort, and its order: larger first,
/// NaN above everything (aten/src/ATen/native/TopKImpl.h, `topk_impl_loop`).
using Entry = std::pair<float, int64_t>;
bool comes_first(const Entry& x, const Entry& y) {
  return (std::isnan(x.first) && !std::isnan(y.first)) || (x.first > y.first);
}

/// The k largest non-NaN values of a row's prefix, in descending order: the
/// smallest of them bounds from below the top of ATen's heap at that point.
struct RowTop {
  std::array<float, kMaxK> values;
  int64_t size = 0;
  int64_t keep = 0;

  /// Takes `x` if it is among the k largest so far; whether it did.
  bool offer(float x) {
    if (size == keep && !(x > values[keep - 1])) return false;
    int64_t p = size < keep ? size++ : keep - 1;
    for (; p > 0 && values[p - 1] < x; --p) values[p] = values[p - 1];
    values[p] = x;
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

/// The top k of `row` (m values) as ATen's `std::partial_sort` leaves them.
/// Its heap selection makes a heap of the first k entries, then lets in, one
/// by one in order, each later entry that comes before the heap's top; the
/// entries that cannot (at most the k-th largest value seen) change nothing.
/// So the same partial sort over the first k entries and a superset of those
/// that can enter, in order, moves the same entries the same way, ties included.
void top_of_row(const float* row, int64_t m, int64_t k, std::vector<Entry>& queue) {
  queue.clear();
  RowTop top;
  top.keep = k;
  for (int64_t j = 0; j < k; ++j) {
    queue.emplace_back(row[j], j);
    if (!std::isnan(row[j])) top.offer(row[j]);
  }
  const auto visit = [&](int64_t j) {
    if (std::isnan(row[j]) || top.offer(row[j])) queue.emplace_back(row[j], j);
  };
  int64_t j = k;
  for (; j + kBlock <= m; j += kBlock) {
    if (top.size == k && all_at_most(row + j, top.values[k - 1])) continue;
    for (int64_t i = 0; i < kBlock; ++i) visit(j + i);
  }
  for (; j < m; ++j) visit(j);
  std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), comes_first);
}

}  // namespace

std::tuple<torch::Tensor, torch::Tensor> exact_topk(const torch::Tensor& scores, int64_t k) {
  // ATen partially sorts where k * 64 <= M, else it takes nth_element.
  if (scores.scalar_type() != at::kFloat || !scores.device().is_cpu() || scores.dim() != 2 ||
      k < 1 || k > kMaxK || k * 64 > scores.size(1)) {
    return at::topk(scores, k);
  }
  const torch::Tensor x = scores.contiguous();  // (N, M)
  const int64_t rows = x.size(0), m = x.size(1);
  torch::Tensor values = at::empty({rows, k}, x.options());                    // (N, k)
  torch::Tensor indices = at::empty({rows, k}, x.options().dtype(at::kLong));  // (N, k)
  const float* in = x.const_data_ptr<float>();
  float* out_values = values.data_ptr<float>();
  int64_t* out_indices = indices.data_ptr<int64_t>();
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<Entry> queue;
    for (int64_t r = begin; r < end; ++r) {
      top_of_row(in + r * m, m, k, queue);
      for (int64_t i = 0; i < k; ++i) {
        out_values[r * k + i] = queue[i].first;
        out_indices[r * k + i] = queue[i].second;
      }
    }
  });
  return {values, indices};
}

}  // namespace detail
}  // namespace mha
