#pragma once

// Private: the templates of alignment.h.

#include "text/alignment.h"
#include "text/utf8.h"

namespace mha {
namespace detail {

template <typename Keep>
void filter_aligned(std::string& text, Alignment& origin, Keep keep) {
  // tokenizers: each kept character removes the dropped ones after it; those
  // before the first kept one are skipped.
  std::vector<CharChange> changes;
  size_t removed = 0, skipped = 0;
  bool kept_any = false;
  for (size_t at = 0, length = 0; at < text.size(); at += length) {
    const char32_t c = code_point_at(text, at, length);
    if (!keep(c)) {
      ++removed;
      continue;
    }
    if (kept_any) {
      changes.back().change = -static_cast<int>(removed);
    } else {
      skipped = removed;
    }
    changes.push_back({c, 0});
    kept_any = true;
    removed = 0;
  }
  if (kept_any) changes.back().change = -static_cast<int>(removed);
  transform(text, origin, changes, kept_any ? skipped : removed);
}

template <typename Map>
std::vector<CharChange> mapped_chars(const std::string& text, Map map) {
  std::vector<CharChange> changes;
  changes.reserve(text.size());
  for (size_t at = 0, length = 0; at < text.size(); at += length) {
    const std::u32string mapped = map(code_point_at(text, at, length));
    for (size_t i = 0; i < mapped.size(); ++i) changes.push_back({mapped[i], i > 0 ? 1 : 0});
  }
  return changes;
}

}  // namespace detail
}  // namespace mha
