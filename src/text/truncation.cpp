#include "text/truncation.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <optional>
#include <utility>

namespace mha {
namespace detail {

namespace {

/// `ids` cut to `length` ids: its first ones, or its last ones `from_left`.
void keep_ids(std::vector<int64_t>& ids, int64_t length, bool from_left) {
  const auto keep = static_cast<size_t>(std::max<int64_t>(length, 0));
  if (ids.size() <= keep) return;
  if (from_left) {
    ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(keep));
  } else {
    ids.resize(keep);
  }
}

/// The lengths `truncate_sequences` cuts `a` and `b` (a pair, or null) to;
/// none where a side keeps its length.
std::pair<std::optional<int64_t>, std::optional<int64_t>> truncated_lengths(
    const std::vector<int64_t>& a_ids,
    const std::vector<int64_t>* b_ids,
    int64_t max_length,
    Truncation strategy) {
  const auto a = static_cast<int64_t>(a_ids.size());
  const std::optional<int64_t> b =
      b_ids ? std::optional<int64_t>(static_cast<int64_t>(b_ids->size())) : std::nullopt;
  const int64_t total = a + b.value_or(0);
  if (strategy == Truncation::kNone || total <= max_length) return {};
  if (max_length == 0) return {0, b ? std::optional<int64_t>(0) : std::nullopt};
  const int64_t to_remove = total - max_length;
  if (strategy == Truncation::kLongestFirst) {
    if (!b) return {max_length, std::nullopt};
    // The shorter keeps its length when the longer can give all the excess;
    // else both are cut to half of max_length (the second gets the odd one).
    int64_t n1 = a, n2 = *b;
    const bool swap = n1 > n2;
    if (swap) std::swap(n1, n2);
    n2 = n1 > max_length ? n1 : std::max(n1, max_length - n1);
    if (n1 + n2 > max_length) {
      n1 = max_length / 2;
      n2 = n1 + max_length % 2;
    }
    if (swap) std::swap(n1, n2);
    return {n1 < a ? std::optional<int64_t>(n1) : std::nullopt,
            n2 < *b ? std::optional<int64_t>(n2) : std::nullopt};
  }
  TORCH_CHECK_VALUE(strategy == Truncation::kOnlyFirst || b.has_value(),
                    "Truncation error: Second sequence not provided");
  const int64_t target = strategy == Truncation::kOnlyFirst ? a : *b;
  TORCH_CHECK_VALUE(target > to_remove,
                    "Truncation error: Sequence to truncate too short to respect the provided "
                    "max_length");
  if (strategy == Truncation::kOnlyFirst) return {a - to_remove, std::nullopt};
  return {std::nullopt, *b - to_remove};
}

/// `ids` in windows of `length` sharing `stride` ids, from the start (or,
/// `from_left`, from the end); one window where `length` is none.
std::vector<std::vector<int64_t>> windows_of(const std::vector<int64_t>& ids,
                                             const std::optional<int64_t>& length,
                                             int64_t stride,
                                             bool from_left) {
  const auto n = static_cast<int64_t>(ids.size());
  if (!length || *length >= n) return {ids};
  if (*length == 0) return {{}, ids};
  TORCH_CHECK_VALUE(stride < *length, "`stride` must be strictly less than `max_len=", *length,
                    "` (note that `max_len` may be shorter than the max length of the original "
                    "model, as it subtracts the number of special characters");
  const auto slice = [&](int64_t begin, int64_t end) {
    return std::vector<int64_t>(ids.begin() + begin, ids.begin() + end);
  };
  std::vector<std::vector<int64_t>> windows;
  const int64_t step = *length - stride;
  if (!from_left) {
    for (int64_t begin = 0; begin < n; begin += step) {
      const int64_t end = std::min(begin + *length, n);
      windows.push_back(slice(begin, end));
      if (end == n) break;
    }
  } else {
    for (int64_t last = n - 1; last >= 0; last -= step) {
      const int64_t begin = std::max<int64_t>(last + 1 - *length, 0);
      windows.push_back(slice(begin, last + 1));
      if (begin == 0) break;
    }
  }
  return windows;
}

}  // namespace

void truncate_sequences(std::vector<int64_t>& a,
                        std::vector<int64_t>* b,
                        int64_t max_length,
                        Truncation strategy,
                        bool from_left) {
  const auto [a_length, b_length] = truncated_lengths(a, b, max_length, strategy);
  if (a_length) keep_ids(a, *a_length, from_left);
  if (b && b_length) keep_ids(*b, *b_length, from_left);
}

SequenceWindows truncation_windows(const std::vector<int64_t>& a,
                                   const std::vector<int64_t>* b,
                                   int64_t max_length,
                                   Truncation strategy,
                                   bool from_left,
                                   int64_t stride) {
  const auto [a_length, b_length] = truncated_lengths(a, b, max_length, strategy);
  SequenceWindows windows{windows_of(a, a_length, stride, from_left), {}};
  if (b) windows.b = windows_of(*b, b_length, stride, from_left);
  return windows;
}

}  // namespace detail
}  // namespace mha
