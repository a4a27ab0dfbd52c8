#include "text/bert_text.h"

#include "text/normalizers.h"
#include "text/pattern.h"
#include "text/unicode_classes.h"
#include "text/utf8.h"

namespace mha {
namespace detail {

namespace {

/// BERT's whitespace: tab, newline and carriage return, and Unicode's.
bool is_bert_whitespace(char32_t c) {
  return c == '\t' || c == '\n' || c == '\r' || is_white_space(c);
}

/// BERT's control characters: category C*, but tab, newline and carriage return.
bool is_bert_control(char32_t c) { return c != '\t' && c != '\n' && c != '\r' && is_other(c); }

/// The CJK Unified Ideographs blocks BERT spaces.
bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/// BERT's punctuation: ASCII punctuation (symbols such as `$` and `+` too) or category P*.
bool is_bert_punctuation(char32_t c) {
  const bool ascii = (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) ||
                     (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
  return ascii || is_punctuation(c);
}

/// `text` with `keep(c)` false characters left out and the others written by `write(out, c)`.
template <typename Keep, typename Write>
std::string map_chars(const std::string& text, Keep keep, Write write) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0, length = 0; at < text.size(); at += length) {
    const char32_t c = code_point_at(text, at, length);
    if (keep(c)) write(out, c);
  }
  return out;
}

}  // namespace

std::string BertNormalizer::normalize(const std::string& text) const {
  std::string s = text;
  const auto all = [](char32_t) { return true; };
  if (clean_text_) {
    s = map_chars(
        s, [](char32_t c) { return c != 0 && c != 0xFFFD && !is_bert_control(c); },
        [](std::string& out, char32_t c) { append_utf8(out, is_bert_whitespace(c) ? U' ' : c); });
  }
  if (handle_chinese_chars_) {
    s = map_chars(s, all, [](std::string& out, char32_t c) {
      if (is_chinese_char(c)) out += ' ';
      append_utf8(out, c);
      if (is_chinese_char(c)) out += ' ';
    });
  }
  if (strip_accents_) {
    s = map_chars(
        unicode_form(s, UnicodeForm::kNFD), [](char32_t c) { return !is_mark_nonspacing(c); },
        append_utf8);
  }
  if (lowercase_) s = map_chars(s, all, append_lowercase);
  return s;
}

void BertNormalizer::normalize_aligned(std::string& text, Alignment& origin) const {
  if (clean_text_) {
    filter_aligned(text, origin,
                   [](char32_t c) { return c != 0 && c != 0xFFFD && !is_bert_control(c); });
    transform(text, origin, mapped_chars(text, [](char32_t c) {
                return std::u32string(1, is_bert_whitespace(c) ? U' ' : c);
              }));
  }
  if (handle_chinese_chars_) {
    std::vector<CharChange> changes;  // a space replaces the character, which follows it again
    for (size_t at = 0, length = 0; at < text.size(); at += length) {
      const char32_t c = code_point_at(text, at, length);
      if (is_chinese_char(c)) {
        changes.insert(changes.end(), {{U' ', 0}, {c, 1}, {U' ', 1}});
      } else {
        changes.push_back({c, 0});
      }
    }
    transform(text, origin, changes);
  }
  if (strip_accents_) {
    unicode_form_aligned(text, origin, UnicodeForm::kNFD);
    filter_aligned(text, origin, [](char32_t c) { return !is_mark_nonspacing(c); });
  }
  if (lowercase_) transform(text, origin, mapped_chars(text, lowercase_chars));
}

void BertPreTokenizer::split(const TextPiece& piece, std::vector<TextPiece>& out) const {
  // Whitespace ends a word and is dropped; punctuation is a word of its own.
  std::vector<TextPiece> words;
  append_ranges(piece,
                split_ranges(find_char_matches(piece.text, is_white_space), SplitBehavior::kRemoved,
                             /*invert=*/false),
                words);
  for (const TextPiece& word : words) {
    append_ranges(word,
                  split_ranges(find_char_matches(word.text, is_bert_punctuation),
                               SplitBehavior::kIsolated, /*invert=*/false),
                  out);
  }
}

}  // namespace detail
}  // namespace mha
