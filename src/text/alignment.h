#pragma once

// Private: where each byte of a changed text came from, as tokenizers'
// NormalizedString tracks it (tokenizers/src/tokenizer/normalizer.rs), so
// that a token's bytes in the normalized, pre-tokenized text map back to
// characters of the text the caller gave (offsets).

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "text/utf8.h"

namespace mha {
namespace detail {

/// For each byte of a text, the bytes [first, second) of the original text it
/// came from; empty where offsets are not tracked.
using Alignment = std::vector<std::pair<uint32_t, uint32_t>>;

/// One character of a transformation and how it changes the text:
/// tokenizers' `(char, isize)`: 0 replaces the next character, +1 is inserted
/// (aligned as the byte before it), -n replaces the next character and removes
/// the n after it.
struct CharChange {
  char32_t c;
  int change;
};

/// The alignment of an unchanged text: each byte to its character's bytes.
Alignment identity_alignment(const std::string& text);

/// `text` rewritten as `changes` say, `origin` (one entry per byte of `text`)
/// with it; the first `skipped` characters are removed first. tokenizers'
/// `NormalizedString::transform`.
void transform(std::string& text,
               Alignment& origin,
               const std::vector<CharChange>& changes,
               size_t skipped = 0);

/// The characters of `text` for which `keep` holds, `origin` with them:
/// tokenizers' `NormalizedString::filter`.
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

/// Each character `c` of `text` replaced by `map(c)` (a std::u32string, maybe
/// several characters: the first replaces, the others are inserted).
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

/// Appends to `changes` the characters of `replacement`, which stands for
/// `replaced_count` characters: tokenizers' rule (precompiled.rs `replace`):
/// all replace, the last ones are inserted where there are more, the last
/// one removes the rest where there are fewer (the one before it, when
/// `replacement` is empty).
void append_replacement(std::vector<CharChange>& changes,
                        size_t replaced_count,
                        const std::string& replacement);

/// `prefix` before `text` unless it is empty; `origin`, if tracked, aligns the
/// prefix as the first character (tokenizers' `NormalizedString::prepend`).
void prepend_aligned(std::string& text, Alignment& origin, const std::string& prefix);

/// Each of `matches` (byte ranges of `text`, in order) replaced by `content`;
/// `origin`, if tracked, aligns `content` as the match's last byte
/// (tokenizers' `NormalizedString::replace`).
void replace_aligned(std::string& text,
                     Alignment& origin,
                     const std::vector<std::pair<size_t, size_t>>& matches,
                     const std::string& content);

/// `origin`'s original bytes of `text`'s bytes [begin, end): from the first
/// one's start to the last one's end (an empty range: where it stands).
std::pair<uint32_t, uint32_t> original_range(const Alignment& origin, size_t begin, size_t end);

}  // namespace detail
}  // namespace mha
