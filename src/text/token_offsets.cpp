#include "text/token_offsets.h"

#include "text/utf8.h"

namespace mha {
namespace detail {

namespace {

using Offsets = std::pair<int64_t, int64_t>;

/// For each byte of `text`, the index of the character it belongs to.
std::vector<int64_t> character_of_each_byte(const std::string& text) {
  std::vector<int64_t> out;
  out.reserve(text.size());
  int64_t index = 0;
  for (size_t at = 0, length = 0; at < text.size(); at += length, ++index) {
    code_point_at(text, at, length);
    out.insert(out.end(), length, index);
  }
  return out;
}

/// tokenizers' `BytesToCharOffsetConverter::convert`: a start byte past the
/// text leaves the offsets as they are.
Offsets convert(const std::vector<int64_t>& char_of, std::pair<uint32_t, uint32_t> bytes) {
  const auto [start, end] = bytes;
  if (start >= char_of.size()) return {start, end};
  if (end < char_of.size()) return {char_of[start], char_of[end]};
  const int64_t last = end >= 1 && end - 1 < char_of.size() ? char_of[end - 1] : char_of[start];
  return {char_of[start], last + 1};
}

/// How many of `token`'s characters, from its start (or its end), are
/// spaces: whitespace or GPT-2's byte character for ' ' (U+0120).
size_t space_run(const std::string& token, bool from_end) {
  std::vector<char32_t> chars;
  for (size_t at = 0, length = 0; at < token.size(); at += length) {
    chars.push_back(code_point_at(token, at, length));
  }
  size_t count = 0;
  for (size_t i = 0; i < chars.size(); ++i) {
    const char32_t c = chars[from_end ? chars.size() - 1 - i : i];
    if (c != U'\u0120' && !is_white_space(c)) break;
    ++count;
  }
  return count;
}

/// tokenizers' `process_offsets` (processors/byte_level.rs) on token `i`.
void trim(Offsets& offsets, const std::string& token, size_t i, bool keeps_prefix_space) {
  auto leading = static_cast<int64_t>(space_run(token, /*from_end=*/false));
  const auto trailing = static_cast<int64_t>(space_run(token, /*from_end=*/true));
  if (leading > 0) {
    const bool first = i == 0 || offsets.first == 0;
    if (first && keeps_prefix_space && leading == 1) leading = 0;
    offsets.first = std::min(offsets.first + leading, offsets.second);
  }
  if (trailing > 0 && offsets.second >= trailing) {
    offsets.second = std::max(offsets.second - trailing, offsets.first);
  }
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> character_offsets(const std::string& text,
                                                           const Spans& byte_offsets) {
  const std::vector<int64_t> char_of = character_of_each_byte(text);
  std::vector<Offsets> out;
  out.reserve(byte_offsets.size());
  for (const auto& bytes : byte_offsets) out.push_back(convert(char_of, bytes));
  return out;
}

void trim_offsets(const TokenizerPipeline& pipeline,
                  int64_t id,
                  size_t index,
                  std::pair<int64_t, int64_t>& offsets) {
  if (!pipeline.post_processor.trim_offsets) return;
  const std::string* token = pipeline.token_of(id);
  if (token == nullptr) return;
  trim(offsets, *token, index, pipeline.post_processor.trim_keeps_prefix_space);
}

}  // namespace detail
}  // namespace mha
