#include "text/precompiled.h"

#include <c10/util/Exception.h>
#include <utf8proc.h>

#include <cstring>

#include "text/utf8.h"

namespace mha {
namespace detail {

namespace {

// A Darts double-array unit (sentencepiece/third_party/darts_clone).
bool has_leaf(uint32_t unit) { return ((unit >> 8) & 1) == 1; }
uint32_t value_of(uint32_t unit) { return unit & ((1u << 31) - 1); }
uint32_t label_of(uint32_t unit) { return unit & ((1u << 31) | 0xFF); }
uint32_t offset_of(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

/// `text` split into extended grapheme clusters (UAX #29, utf8proc's rules).
std::vector<std::string_view> grapheme_clusters(const std::string& text) {
  std::vector<std::string_view> clusters;
  utf8proc_int32_t state = 0;
  size_t begin = 0, length = 0;
  char32_t previous = 0;
  for (size_t at = 0; at < text.size(); at += length) {
    const char32_t c = code_point_at(text, at, length);
    if (at > 0 && utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(previous),
                                                   static_cast<utf8proc_int32_t>(c), &state)) {
      clusters.push_back(std::string_view(text).substr(begin, at - begin));
      begin = at;
    }
    previous = c;
  }
  if (begin < text.size()) clusters.push_back(std::string_view(text).substr(begin));
  return clusters;
}

}  // namespace

PrecompiledNormalizer::PrecompiledNormalizer(const std::string& charsmap) {
  uint32_t trie_bytes = 0;
  TORCH_CHECK_VALUE(charsmap.size() >= 4, "Precompiled: the charsmap has ", charsmap.size(),
                    " bytes, fewer than its 4-byte trie size");
  std::memcpy(&trie_bytes, charsmap.data(), 4);  // little-endian, as x86 and ARM read it
  TORCH_CHECK_VALUE(trie_bytes % 4 == 0 && 4 + size_t{trie_bytes} <= charsmap.size(),
                    "Precompiled: the charsmap's trie of ", trie_bytes, " bytes does not fit its ",
                    charsmap.size(), " bytes");
  trie_.resize(trie_bytes / 4);
  std::memcpy(trie_.data(), charsmap.data() + 4, trie_bytes);
  replacements_ = charsmap.substr(4 + trie_bytes);
  check_utf8(replacements_, "Precompiled: the charsmap's replacements");
  TORCH_CHECK_VALUE(!trie_.empty(), "Precompiled: the charsmap's trie is empty");
}

std::optional<std::string_view> PrecompiledNormalizer::transform(std::string_view chunk) const {
  const auto unit_at = [&](size_t at) -> std::optional<uint32_t> {
    if (at >= trie_.size()) return std::nullopt;
    return trie_[at];
  };
  size_t node = offset_of(trie_[0]);
  for (const char byte : chunk) {
    const auto c = static_cast<unsigned char>(byte);
    if (c == 0) break;
    node ^= c;
    const auto unit = unit_at(node);
    if (!unit || label_of(*unit) != c) return std::nullopt;
    node ^= offset_of(*unit);
    if (has_leaf(*unit)) {  // the shortest key: tokenizers takes the first result
      const auto leaf = unit_at(node);
      if (!leaf || value_of(*leaf) >= replacements_.size()) return std::nullopt;
      const size_t begin = value_of(*leaf), end = replacements_.find('\0', begin);
      return std::string_view(replacements_)
          .substr(begin, (end == std::string::npos ? replacements_.size() : end) - begin);
    }
  }
  return std::nullopt;
}

std::string PrecompiledNormalizer::normalize(const std::string& text) const {
  std::string out;
  out.reserve(text.size());
  for (const std::string_view cluster : grapheme_clusters(text)) {
    if (cluster.size() < 6) {
      if (const auto replaced = transform(cluster)) {
        out += *replaced;
        continue;
      }
    }
    const std::string characters(cluster);
    for (size_t at = 0, length = 0; at < characters.size(); at += length) {
      code_point_at(characters, at, length);
      const std::string_view character = cluster.substr(at, length);
      const auto replaced = transform(character);
      out += replaced ? *replaced : character;
    }
  }
  return out;
}

void PrecompiledNormalizer::normalize_aligned(std::string& text, Alignment& origin) const {
  std::vector<CharChange> changes;
  for (const std::string_view cluster : grapheme_clusters(text)) {
    const std::string characters(cluster);
    size_t count = 0;
    for (size_t at = 0, length = 0; at < characters.size(); at += length, ++count) {
      code_point_at(characters, at, length);
    }
    if (cluster.size() < 6) {
      if (const auto replaced = transform(cluster)) {
        append_replacement(changes, count, std::string(*replaced));
        continue;
      }
    }
    for (size_t at = 0, length = 0; at < characters.size(); at += length) {
      const char32_t c = code_point_at(characters, at, length);
      if (const auto replaced = transform(cluster.substr(at, length))) {
        append_replacement(changes, 1, std::string(*replaced));
      } else {
        changes.push_back({c, 0});
      }
    }
  }
  detail::transform(text, origin, changes);
}

std::string base64_decode(const std::string& text, const char* what) {
  const auto sextet = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  TORCH_CHECK_VALUE(text.size() % 4 == 0, what, ": expected base64 (a multiple of 4 characters), ",
                    "but got ", text.size(), " characters");
  std::string bytes;
  uint32_t bits = 0;
  int count = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '=' && i + 2 >= text.size()) break;  // padding ends the text
    const int value = sextet(text[i]);
    TORCH_CHECK_VALUE(value >= 0, what, ": '", text[i], "' at ", i, " is not base64");
    bits = (bits << 6) | static_cast<uint32_t>(value);
    if (++count % 4 == 0) {
      bytes += static_cast<char>((bits >> 16) & 0xFF);
      bytes += static_cast<char>((bits >> 8) & 0xFF);
      bytes += static_cast<char>(bits & 0xFF);
      bits = 0;
    }
  }
  if (count % 4 == 3) {  // two bytes
    bytes += static_cast<char>((bits >> 10) & 0xFF);
    bytes += static_cast<char>((bits >> 2) & 0xFF);
  } else if (count % 4 == 2) {  // one byte
    bytes += static_cast<char>((bits >> 4) & 0xFF);
  }
  return bytes;
}

}  // namespace detail
}  // namespace mha
