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

std::string PrependNormalizer::normalize(const std::string& text) const {
  return text.empty() ? text : prefix_ + text;
}

std::string NormalizerSequence::normalize(const std::string& text) const {
  std::string out = text;
  for (const auto& normalizer : normalizers_) out = normalizer->normalize(out);
  return out;
}

}  // namespace detail
}  // namespace mha
