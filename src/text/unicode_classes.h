#pragma once

// Private: the Unicode facts the tokenizers' components ask of a character
// (its general category, its lowercase) and of a text (its NFD form), from
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
/// `text` (valid UTF-8) in Unicode's canonical decomposition (NFD).
std::string nfd(const std::string& text);

}  // namespace detail
}  // namespace mha
