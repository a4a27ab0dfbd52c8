#include "text/byte_level.h"

#include <array>
#include <unordered_map>

#include "text/pattern.h"
#include "text/utf8.h"

namespace mha {
namespace detail {

namespace {

/// GPT-2's map of the 256 bytes to printable characters: the printable
/// Latin-1 bytes map to themselves, the others to 256 and up, in order.
std::array<char32_t, 256> make_byte_chars() {
  std::array<char32_t, 256> chars{};
  std::array<bool, 256> printable{};
  for (int b = '!'; b <= '~'; ++b) printable[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) chars[b] = printable[b] ? static_cast<char32_t>(b) : next++;
  return chars;
}

const std::array<char32_t, 256>& byte_chars() {
  static const std::array<char32_t, 256> chars = make_byte_chars();
  return chars;
}

/// The map back: character -> byte.
const std::unordered_map<char32_t, unsigned char>& char_bytes() {
  static const std::unordered_map<char32_t, unsigned char> bytes = [] {
    std::unordered_map<char32_t, unsigned char> m;
    for (int b = 0; b < 256; ++b) m.emplace(byte_chars()[b], static_cast<unsigned char>(b));
    return m;
  }();
  return bytes;
}

/// GPT-2's pattern, as tokenizers' ByteLevel writes it.
const Pattern& gpt2_pattern() {
  static const Pattern pattern(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", true);
  return pattern;
}

/// `piece`'s bytes written as their characters (UTF-8).
std::string as_byte_chars(const std::string& piece) {
  std::string out;
  out.reserve(piece.size() * 2);
  for (const char byte : piece) append_utf8(out, byte_chars()[static_cast<unsigned char>(byte)]);
  return out;
}

}  // namespace

void ByteLevelPreTokenizer::split(const TextPiece& piece, std::vector<TextPiece>& out) const {
  if (piece.text.empty()) return;
  const bool prefix = add_prefix_space_ && piece.text.rfind(' ', 0) != 0;
  const TextPiece prefixed{prefix ? " " + piece.text : piece.text, piece.at_start};
  const size_t first = out.size();
  if (use_regex_) {
    append_ranges(prefixed,
                  split_ranges(gpt2_pattern().find_matches(prefixed.text), SplitBehavior::kIsolated,
                               /*invert=*/false),
                  out);
  } else {
    out.push_back(prefixed);
  }
  for (size_t i = first; i < out.size(); ++i) out[i].text = as_byte_chars(out[i].text);
}

std::optional<std::string> byte_level_bytes(const std::string& token) {
  std::string bytes;
  for (size_t at = 0, length = 0; at < token.size(); at += length) {
    const auto found = char_bytes().find(code_point_at(token, at, length));
    if (found == char_bytes().end()) return std::nullopt;
    bytes += static_cast<char>(found->second);
  }
  return bytes;
}

std::vector<std::string> ByteLevelDecoder::decode_chain(std::vector<std::string> tokens) const {
  std::string bytes;
  for (const std::string& token : tokens) bytes += byte_level_bytes(token).value_or(token);
  return {utf8_lossy(bytes)};
}

}  // namespace detail
}  // namespace mha
