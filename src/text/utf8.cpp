#include "text/utf8.h"

#include <c10/util/Exception.h>

namespace mha {
namespace detail {

namespace {

/// The length of the well-formed UTF-8 sequence at `p` (`n` bytes left), or,
/// negated, the length of its maximal invalid subpart (at least 1): Unicode's
/// table of well-formed byte sequences (The Unicode Standard, Table 3-7).
int utf8_sequence_length(const unsigned char* p, size_t n) {
  const unsigned char b = p[0];
  if (b < 0x80) return 1;
  int length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the second byte's range
  if (b >= 0xC2 && b <= 0xDF) {
    length = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    length = 3;
    if (b == 0xE0) low = 0xA0;
    if (b == 0xED) high = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    length = 4;
    if (b == 0xF0) low = 0x90;
    if (b == 0xF4) high = 0x8F;
  } else {
    return -1;
  }
  for (int i = 1; i < length; ++i) {
    if (static_cast<size_t>(i) >= n) return -i;
    const unsigned char lo = i == 1 ? low : 0x80, hi = i == 1 ? high : 0xBF;
    if (p[i] < lo || p[i] > hi) return -i;
  }
  return length;
}

}  // namespace

void check_utf8(const std::string& text, const char* what) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t at = 0; at < text.size();) {
    const int length = utf8_sequence_length(p + at, text.size() - at);
    TORCH_CHECK_VALUE(length > 0, what, ": expected UTF-8 text, but the bytes at offset ", at,
                      " are not a UTF-8 sequence (first byte 0x", std::hex, static_cast<int>(p[at]),
                      std::dec, ")");
    at += static_cast<size_t>(length);
  }
}

bool is_utf8(const std::string& bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  for (size_t at = 0; at < bytes.size();) {
    const int length = utf8_sequence_length(p + at, bytes.size() - at);
    if (length <= 0) return false;
    at += static_cast<size_t>(length);
  }
  return true;
}

std::string utf8_lossy(const std::string& bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::string out;
  out.reserve(bytes.size());
  for (size_t at = 0; at < bytes.size();) {
    const int length = utf8_sequence_length(p + at, bytes.size() - at);
    if (length > 0) {
      out.append(bytes, at, static_cast<size_t>(length));
      at += static_cast<size_t>(length);
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      at += static_cast<size_t>(-length);
    }
  }
  return out;
}

char32_t code_point_at(const std::string& text, size_t at, size_t& length) {
  const auto b = static_cast<unsigned char>(text[at]);
  length = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  char32_t c = length == 1 ? b : b & (0x7F >> length);
  for (size_t i = 1; i < length; ++i)
    c = (c << 6) | (static_cast<unsigned char>(text[at + i]) & 0x3F);
  return c;
}

size_t count_chars(const std::string& text) {
  size_t count = 0;
  for (const char byte : text) count += (static_cast<unsigned char>(byte) & 0xC0) != 0x80;
  return count;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool is_white_space(char32_t c) {
  // Unicode's PropList.txt, White_Space.
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

}  // namespace detail
}  // namespace mha
