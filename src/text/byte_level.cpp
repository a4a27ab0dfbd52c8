#include "text/byte_level.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <c10/util/Exception.h>
#include <pcre2.h>

#include <array>
#include <memory>
#include <unordered_map>

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

/// GPT-2's pattern (tokenizers' ByteLevel, Oniguruma there). `\s` is spelled
/// as Unicode's White_Space (Oniguruma's `\s`): PCRE2's leaves out U+0085.
constexpr const char* kPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\x{85}\p{L}\p{N}]+|[\s\x{85}]+(?![^\s\x{85}])|[\s\x{85}]+)";

/// The compiled pattern, shared by all threads (each match has its own data).
const pcre2_code* gpt2_pattern() {
  static const std::unique_ptr<pcre2_code, decltype(&pcre2_code_free)> code = [] {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* compiled =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
    TORCH_CHECK(compiled != nullptr, "ByteLevel: PCRE2 refused GPT-2's pattern at offset ", offset,
                " (error ", error, ")");
    return std::unique_ptr<pcre2_code, decltype(&pcre2_code_free)>(compiled, &pcre2_code_free);
  }();
  return code.get();
}

/// `text`'s pieces split by the pattern, the matches isolated (every byte
/// of `text` is in exactly one piece).
std::vector<std::string> split_isolated(const std::string& text) {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(gpt2_pattern(), nullptr), &pcre2_match_data_free);
  std::vector<std::string> pieces;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;
  while (at < text.size()) {
    const int found = pcre2_match(gpt2_pattern(), subject, text.size(), at, PCRE2_NO_UTF_CHECK,
                                  match.get(), nullptr);
    if (found < 0) break;
    const PCRE2_SIZE* range = pcre2_get_ovector_pointer(match.get());
    if (range[0] > at) pieces.push_back(text.substr(at, range[0] - at));  // the gap
    pieces.push_back(text.substr(range[0], range[1] - range[0]));
    at = range[1];
  }
  if (at < text.size()) pieces.push_back(text.substr(at));
  return pieces;
}

/// `piece`'s bytes written as their characters (UTF-8).
std::string as_byte_chars(const std::string& piece) {
  std::string out;
  out.reserve(piece.size() * 2);
  for (const char byte : piece) append_utf8(out, byte_chars()[static_cast<unsigned char>(byte)]);
  return out;
}

}  // namespace

std::vector<std::string> ByteLevelPreTokenizer::pre_tokenize(const std::string& text) const {
  if (text.empty()) return {};
  const std::string prefixed = add_prefix_space_ && text.rfind(' ', 0) != 0 ? " " + text : text;
  std::vector<std::string> pieces =
      use_regex_ ? split_isolated(prefixed) : std::vector<std::string>{prefixed};
  for (std::string& piece : pieces) piece = as_byte_chars(piece);
  return pieces;
}

std::string ByteLevelDecoder::decode(const std::vector<std::string>& tokens) const {
  std::string bytes;
  for (const std::string& token : tokens) {
    std::string own;
    bool mapped = true;
    for (size_t at = 0, length = 0; at < token.size() && mapped; at += length) {
      const auto found = char_bytes().find(code_point_at(token, at, length));
      mapped = found != char_bytes().end();
      if (mapped) own += static_cast<char>(found->second);
    }
    bytes += mapped ? own : token;
  }
  return utf8_lossy(bytes);
}

}  // namespace detail
}  // namespace mha
