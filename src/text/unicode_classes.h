#pragma once

// Private: the Unicode facts the tokenizers' components ask of a character
// (its general category, its lowercase) and of a text (its normalization forms), from
// utf8proc (Debian's libutf8proc-dev), with Rust's `char` semantics where
// tokenizers uses them.

#include <string>

namespace mha {
namespace detail {

/// General category C* (Cc, Cf, Cs, Co, Cn): the `unicode_categories`
/// crate's `is_other`.
bool is_other(char32_t c);
/// General category Mn (a nonspacing mark).
bool is_mark_nonspacing(char32_t c);
/// General category P* (Pc, Pd, Ps, Pe, Pi, Pf, Po).
bool is_punctuation(char32_t c);
/// Appends Rust's `char::to_lowercase(c)` (the full mapping: U+0130 becomes
/// two characters) to `out` as UTF-8.
void append_lowercase(std::string& out, char32_t c);
/// General category M* (Mn, Mc, Me): a combining mark.
bool is_mark(char32_t c);
/// Rust regex's Unicode `\w`: letters (and Nl), marks, decimal digits,
/// connector punctuation, the joiners.
bool is_word_char(char32_t c);
/// General category N* (Nd, Nl, No): Rust's `char::is_numeric`.
bool is_numeric(char32_t c);

/// Unicode's normalization forms.
enum class UnicodeForm { kNFC, kNFD, kNFKC, kNFKD };
/// `text` (valid UTF-8) in normalization form `form`.
std::string unicode_form(const std::string& text, UnicodeForm form);

}  // namespace detail
}  // namespace mha
