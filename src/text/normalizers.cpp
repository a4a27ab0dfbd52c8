#include "text/normalizers.h"

#include "text/utf8.h"

namespace mha {
namespace detail {

namespace {

/// `text`'s characters for which `keep` holds.
template <typename Keep>
std::string filter_chars(const std::string& text, Keep keep) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0, length = 0; at < text.size(); at += length) {
    if (keep(code_point_at(text, at, length))) out.append(text, at, length);
  }
  return out;
}

}  // namespace

std::string UnicodeFormNormalizer::normalize(const std::string& text) const {
  return unicode_form(text, form_);
}

namespace {

/// Whether `c` may compose with the character before it: a combining mark,
/// or a Hangul vowel or final consonant jamo.
bool joins_previous(char32_t c) {
  return is_mark(c) || (c >= 0x1160 && c <= 0x11FF) || (c >= 0xD7B0 && c <= 0xD7FF);
}

}  // namespace

void unicode_form_aligned(std::string& text, Alignment& origin, UnicodeForm form) {
  // Runs: a character and those after it that may compose with it.
  std::vector<std::pair<size_t, size_t>> runs;  // byte ranges
  for (size_t at = 0, length = 0; at < text.size(); at += length) {
    const char32_t c = code_point_at(text, at, length);
    if (runs.empty() || !joins_previous(c)) runs.emplace_back(at, at);
    runs.back().second = at + length;
  }
  std::vector<CharChange> changes;
  std::string joined;
  for (const auto& [begin, end] : runs) {
    const std::string run = text.substr(begin, end - begin);
    const std::string normalized = unicode_form(run, form);
    joined += normalized;
    append_replacement(changes, count_chars(run), normalized);
  }
  const std::string whole = unicode_form(text, form);
  if (joined != whole) {  // composed across runs
    changes.clear();
    append_replacement(changes, count_chars(text), whole);
  }
  transform(text, origin, changes);
}

void UnicodeFormNormalizer::normalize_aligned(std::string& text, Alignment& origin) const {
  unicode_form_aligned(text, origin, form_);
}

std::u32string lowercase_chars(char32_t c) {
  std::string utf8;
  append_lowercase(utf8, c);
  std::u32string out;
  for (size_t at = 0, length = 0; at < utf8.size(); at += length) {
    out += code_point_at(utf8, at, length);
  }
  return out;
}

void LowercaseNormalizer::normalize_aligned(std::string& text, Alignment& origin) const {
  transform(text, origin, mapped_chars(text, lowercase_chars));
}

std::string LowercaseNormalizer::normalize(const std::string& text) const {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0, length = 0; at < text.size(); at += length) {
    append_lowercase(out, code_point_at(text, at, length));
  }
  return out;
}

std::string StripAccentsNormalizer::normalize(const std::string& text) const {
  return filter_chars(text, [](char32_t c) { return !is_mark(c); });
}

void StripAccentsNormalizer::normalize_aligned(std::string& text, Alignment& origin) const {
  filter_aligned(text, origin, [](char32_t c) { return !is_mark(c); });
}

void StripNormalizer::normalize_aligned(std::string& text, Alignment& origin) const {
  const std::string stripped = normalize(text);
  if (stripped.size() == text.size()) return;
  // The leading whitespace skipped, the rest kept as it is, the trailing dropped.
  size_t leading_chars = 0, leading_bytes = 0;
  for (size_t length = 0; left_ && !stripped.empty(); leading_bytes += length, ++leading_chars) {
    if (!is_white_space(code_point_at(text, leading_bytes, length))) break;
  }
  std::vector<CharChange> changes;
  for (size_t at = 0, length = 0; at < stripped.size(); at += length) {
    changes.push_back({code_point_at(stripped, at, length), 0});
  }
  transform(text, origin, changes, leading_chars);
}

std::string StripNormalizer::normalize(const std::string& text) const {
  size_t begin = 0, end = text.size();
  for (size_t length = 0; left_ && begin < end; begin += length) {
    if (!is_white_space(code_point_at(text, begin, length))) break;
  }
  while (right_ && end > begin) {
    size_t start = end - 1;  // the last character's first byte
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t length = 0;
    if (!is_white_space(code_point_at(text, start, length))) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

std::string replace_matches(const Pattern& pattern,
                            const std::string& text,
                            const std::string& content) {
  std::string out;
  for (const PatternMatch& s : pattern.find_matches(text)) {
    if (s.is_match) {
      out += content;
    } else {
      out.append(text, s.begin, s.end - s.begin);
    }
  }
  return out;
}

std::string ReplaceNormalizer::normalize(const std::string& text) const {
  return replace_matches(pattern_, text, content_);
}

void ReplaceNormalizer::normalize_aligned(std::string& text, Alignment& origin) const {
  std::vector<std::pair<size_t, size_t>> matches;
  for (const PatternMatch& s : pattern_.find_matches(text)) {
    if (s.is_match) matches.emplace_back(s.begin, s.end);
  }
  replace_aligned(text, origin, matches, content_);
}

std::string PrependNormalizer::normalize(const std::string& text) const {
  return text.empty() ? text : prefix_ + text;
}

void PrependNormalizer::normalize_aligned(std::string& text, Alignment& origin) const {
  prepend_aligned(text, origin, prefix_);
}

void NormalizerSequence::normalize_aligned(std::string& text, Alignment& origin) const {
  for (const auto& normalizer : normalizers_) normalizer->normalize_aligned(text, origin);
}

std::string NormalizerSequence::normalize(const std::string& text) const {
  std::string out = text;
  for (const auto& normalizer : normalizers_) out = normalizer->normalize(out);
  return out;
}

}  // namespace detail
}  // namespace mha
