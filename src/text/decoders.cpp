#include "text/decoders.h"

#include <algorithm>

#include "text/normalizers.h"
#include "text/utf8.h"

namespace mha {
namespace detail {

int fallback_byte(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  int value = 0;
  for (const char c : token.substr(3, 2)) {
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

namespace {

/// Appends the text of `bytes` to `out`: one token when UTF-8, else one
/// U+FFFD each.
void flush_bytes(std::string& bytes, std::vector<std::string>& out) {
  if (bytes.empty()) return;
  if (is_utf8(bytes)) {
    out.push_back(bytes);
  } else {
    out.insert(out.end(), bytes.size(), "\xEF\xBF\xBD");
  }
  bytes.clear();
}

/// `token`'s characters, decoded.
std::vector<char32_t> chars_of(const std::string& token) {
  std::vector<char32_t> chars;
  for (size_t at = 0, length = 0; at < token.size(); at += length) {
    chars.push_back(code_point_at(token, at, length));
  }
  return chars;
}

}  // namespace

std::vector<std::string> ByteFallbackDecoder::decode_chain(std::vector<std::string> tokens) const {
  std::vector<std::string> out;
  std::string bytes;
  for (std::string& token : tokens) {
    const int byte = fallback_byte(token);
    if (byte >= 0) {
      bytes += static_cast<char>(byte);
      continue;
    }
    flush_bytes(bytes, out);
    out.push_back(std::move(token));
  }
  flush_bytes(bytes, out);
  return out;
}

std::vector<std::string> FuseDecoder::decode_chain(std::vector<std::string> tokens) const {
  std::string joined;
  for (const std::string& token : tokens) joined += token;
  return {joined};
}

std::vector<std::string> StripDecoder::decode_chain(std::vector<std::string> tokens) const {
  for (std::string& token : tokens) {
    const std::vector<char32_t> chars = chars_of(token);
    size_t begin = 0, end = chars.size();
    while (begin < std::min(start_, chars.size()) && chars[begin] == content_) ++begin;
    for (size_t i = 0; i < stop_ && end > begin && chars[end - 1] == content_; ++i) --end;
    std::string stripped;
    for (size_t i = begin; i < end; ++i) append_utf8(stripped, chars[i]);
    token = std::move(stripped);
  }
  return tokens;
}

std::vector<std::string> ReplaceDecoder::decode_chain(std::vector<std::string> tokens) const {
  for (std::string& token : tokens) token = replace_matches(pattern_, token, content_);
  return tokens;
}

std::vector<std::string> MetaspaceDecoder::decode_chain(std::vector<std::string> tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string text;
    for (const char32_t c : chars_of(tokens[i])) {
      if (c != replacement_) {
        append_utf8(text, c);
      } else if (i > 0 || scheme_ == PrependScheme::kNever) {
        text += ' ';
      }
    }
    tokens[i] = std::move(text);
  }
  return tokens;
}

std::vector<std::string> BpeSuffixDecoder::decode_chain(std::vector<std::string> tokens) const {
  const Pattern suffix(suffix_, /*regex=*/false);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = replace_matches(suffix, tokens[i], i + 1 == tokens.size() ? "" : " ");
  }
  return tokens;
}

void DecoderSequence::parts(std::vector<const Decoder*>& out) const {
  out.push_back(this);
  for (const auto& step : steps_) step->parts(out);
}

std::vector<std::string> DecoderSequence::decode_chain(std::vector<std::string> tokens) const {
  for (const auto& step : steps_) tokens = step->decode_chain(std::move(tokens));
  return tokens;
}

}  // namespace detail
}  // namespace mha
