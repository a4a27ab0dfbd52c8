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

/// `piece`'s bytes written as their characters (UTF-8); its origin, if
/// tracked, as tokenizers aligns them (a character's later bytes inserted).
void write_byte_chars(TextPiece& piece) {
  if (!piece.origin.empty()) {
    std::vector<CharChange> changes;
    for (size_t at = 0, length = 0; at < piece.text.size(); at += length) {
      code_point_at(piece.text, at, length);
      for (size_t i = 0; i < length; ++i) {
        changes.push_back({byte_chars()[static_cast<unsigned char>(piece.text[at + i])], i > 0});
      }
    }
    transform(piece.text, piece.origin, changes);
    return;
  }
  std::string out;
  out.reserve(piece.text.size() * 2);
  for (const char byte : piece.text) {
    append_utf8(out, byte_chars()[static_cast<unsigned char>(byte)]);
  }
  piece.text = std::move(out);
}

}  // namespace

void ByteLevelPreTokenizer::split(const TextPiece& piece, std::vector<TextPiece>& out) const {
  if (piece.text.empty()) return;
  TextPiece prefixed = piece;
  if (add_prefix_space_ && piece.text.rfind(' ', 0) != 0) prepend_aligned(prefixed, " ");
  const size_t first = out.size();
  if (use_regex_) {
    append_ranges(prefixed,
                  split_ranges(gpt2_pattern().find_matches(prefixed.text), SplitBehavior::kIsolated,
                               /*invert=*/false),
                  out);
  } else {
    out.push_back(prefixed);
  }
  for (size_t i = first; i < out.size(); ++i) write_byte_chars(out[i]);
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
