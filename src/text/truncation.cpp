#include "text/truncation.h"

#include <c10/util/Exception.h>

#include <algorithm>

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

}  // namespace

void truncate_sequences(std::vector<int64_t>& a,
                        std::vector<int64_t>* b,
                        int64_t max_length,
                        Truncation strategy,
                        bool from_left) {
  const auto total = static_cast<int64_t>(a.size() + (b ? b->size() : 0));
  if (strategy == Truncation::kNone || total <= max_length) return;
  const int64_t to_remove = total - max_length;
  if (strategy == Truncation::kLongestFirst) {
    if (b == nullptr) {
      keep_ids(a, max_length, from_left);
      return;
    }
    // The shorter keeps its length when the longer can give all the excess;
    // else both are cut to half of max_length (the second gets the odd one).
    int64_t n1 = static_cast<int64_t>(a.size()), n2 = static_cast<int64_t>(b->size());
    const bool swap = n1 > n2;
    if (swap) std::swap(n1, n2);
    n2 = n1 > max_length ? n1 : std::max(n1, max_length - n1);
    if (n1 + n2 > max_length) {
      n1 = max_length / 2;
      n2 = n1 + max_length % 2;
    }
    if (swap) std::swap(n1, n2);
    keep_ids(a, n1, from_left);
    keep_ids(*b, n2, from_left);
    return;
  }
  TORCH_CHECK_VALUE(strategy == Truncation::kOnlyFirst || b != nullptr,
                    "Truncation error: Second sequence not provided");
  std::vector<int64_t>& target = strategy == Truncation::kOnlyFirst ? a : *b;
  TORCH_CHECK_VALUE(static_cast<int64_t>(target.size()) > to_remove,
                    "Truncation error: Sequence to truncate too short to respect the provided "
                    "max_length");
  keep_ids(target, static_cast<int64_t>(target.size()) - to_remove, from_left);
}

}  // namespace detail
}  // namespace mha
