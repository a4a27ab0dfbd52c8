#include "text/alignment.h"

#include <c10/util/Exception.h>

#include "text/utf8.h"

namespace mha {
namespace detail {

Alignment identity_alignment(const std::string& text) {
  Alignment origin;
  origin.reserve(text.size());
  for (size_t at = 0, length = 0; at < text.size(); at += length) {
    code_point_at(text, at, length);
    const auto begin = static_cast<uint32_t>(at), end = static_cast<uint32_t>(at + length);
    origin.insert(origin.end(), length, {begin, end});
  }
  return origin;
}

void transform(std::string& text,
               Alignment& origin,
               const std::vector<CharChange>& changes,
               size_t skipped) {
  size_t offset = 0;  // the byte of `text` the next replaced character starts at
  auto skip_char = [&] {
    TORCH_INTERNAL_ASSERT(offset < text.size(), "transform: past the end of the text");
    size_t length = 0;
    code_point_at(text, offset, length);
    offset += length;
  };
  for (size_t i = 0; i < skipped; ++i) skip_char();
  std::string out;
  Alignment out_origin;
  out.reserve(text.size());
  out_origin.reserve(text.size());
  for (const auto& [c, change] : changes) {
    // An inserted character takes the alignment of the byte before it.
    const std::pair<uint32_t, uint32_t> align =
        change > 0 ? (offset < 1 ? std::pair<uint32_t, uint32_t>{0, 0} : origin[offset - 1])
                   : origin[offset];
    if (change <= 0) skip_char();
    for (int removed = 0; removed < -change; ++removed) skip_char();
    const size_t before = out.size();
    append_utf8(out, c);
    out_origin.insert(out_origin.end(), out.size() - before, align);
  }
  text = std::move(out);
  origin = std::move(out_origin);
}

void append_replacement(std::vector<CharChange>& changes,
                        size_t replaced_count,
                        const std::string& replacement) {
  size_t count = 0;
  for (size_t at = 0, length = 0; at < replacement.size(); at += length, ++count) {
    changes.push_back({code_point_at(replacement, at, length), 0});
  }
  if (count > replaced_count) {
    for (size_t i = 0; i < count - replaced_count; ++i) changes[changes.size() - 1 - i].change = 1;
  } else if (count < replaced_count && !changes.empty()) {
    changes.back().change -= static_cast<int>(replaced_count - count);
  }
}

void prepend_aligned(std::string& text, Alignment& origin, const std::string& prefix) {
  if (text.empty()) return;
  if (!origin.empty() && !prefix.empty()) {
    // The prefix's first character replaces the text's first one; the rest of
    // the prefix and that character again are inserted after it.
    size_t first_length = 0, prefix_first_length = 0;
    code_point_at(text, 0, first_length);
    code_point_at(prefix, 0, prefix_first_length);
    const auto replaced = origin[0], inserted = origin[first_length - 1];
    Alignment head(prefix_first_length, replaced);
    head.insert(head.end(), prefix.size() - prefix_first_length + first_length, inserted);
    origin.erase(origin.begin(), origin.begin() + static_cast<std::ptrdiff_t>(first_length));
    origin.insert(origin.begin(), head.begin(), head.end());
  }
  text.insert(0, prefix);
}

void replace_aligned(std::string& text,
                     Alignment& origin,
                     const std::vector<std::pair<size_t, size_t>>& matches,
                     const std::string& content) {
  std::string out;
  Alignment out_origin;
  size_t last = 0;
  for (const auto& [begin, end] : matches) {
    out.append(text, last, begin - last);
    out += content;
    if (!origin.empty()) {
      out_origin.insert(out_origin.end(), origin.begin() + static_cast<std::ptrdiff_t>(last),
                        origin.begin() + static_cast<std::ptrdiff_t>(begin));
      const std::pair<uint32_t, uint32_t> align =
          end > 0 ? origin[end - 1] : std::pair<uint32_t, uint32_t>{0, 0};
      out_origin.insert(out_origin.end(), content.size(), align);
    }
    last = end;
  }
  out.append(text, last, std::string::npos);
  if (!origin.empty()) {
    out_origin.insert(out_origin.end(), origin.begin() + static_cast<std::ptrdiff_t>(last),
                      origin.end());
    origin = std::move(out_origin);
  }
  text = std::move(out);
}

std::pair<uint32_t, uint32_t> original_range(const Alignment& origin, size_t begin, size_t end) {
  if (begin >= end) {
    if (begin < origin.size()) return {origin[begin].first, origin[begin].first};
    return origin.empty()
               ? std::pair<uint32_t, uint32_t>{0, 0}
               : std::pair<uint32_t, uint32_t>{origin.back().second, origin.back().second};
  }
  return {origin[begin].first, origin[end - 1].second};
}

}  // namespace detail
}  // namespace mha
