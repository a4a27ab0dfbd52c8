#pragma once

// Private: UTF-8 as the tokenizers read and write it: validity (Python refuses
// invalid text before transformers sees it), code points, and the lossy
// decoding of byte sequences that tokenizers' decoders use (Rust's
// String::from_utf8_lossy).

#include <cstddef>
#include <string>

namespace mha {
namespace detail {

/// Throws `c10::Error` unless `text` is valid UTF-8; the message names `what`
/// and the byte offset of the first invalid sequence.
void check_utf8(const std::string& text, const char* what);
/// Whether `bytes` are valid UTF-8.
bool is_utf8(const std::string& bytes);

/// `bytes` as UTF-8 text, each maximal invalid subpart (Unicode's "U+FFFD
/// substitution of maximal subparts", as Rust's `String::from_utf8_lossy`)
/// replaced by U+FFFD.
std::string utf8_lossy(const std::string& bytes);

/// The code point that starts at byte `at` of valid UTF-8 `text`; `length`
/// receives its byte count.
char32_t code_point_at(const std::string& text, size_t at, size_t& length);

/// The characters (code points) of valid UTF-8 `text`.
size_t count_chars(const std::string& text);

/// Appends `c`'s UTF-8 bytes to `out`.
void append_utf8(std::string& out, char32_t c);

/// Whether `c` has Unicode's White_Space property (Rust's `char::is_whitespace`).
bool is_white_space(char32_t c);

}  // namespace detail
}  // namespace mha
