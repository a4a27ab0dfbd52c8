#include "text/pre_tokenizers.h"

#include <c10/util/Exception.h>

#include <cctype>

#include "text/unicode_classes.h"
#include "text/utf8.h"

namespace mha {
namespace detail {

namespace {

/// Rust regex's Unicode `\w`: Alphabetic, marks, decimal digits, connector
/// punctuation, and the joiners.
constexpr const char* kWordClass = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D})";

/// `piece` with each ' ' replaced by `replacement`.
TextPiece replace_spaces(const TextPiece& piece, const std::string& replacement) {
  std::vector<std::pair<size_t, size_t>> spaces;
  for (size_t i = 0; i < piece.text.size(); ++i) {
    if (piece.text[i] == ' ') spaces.emplace_back(i, i + 1);
  }
  TextPiece out = piece;
  replace_aligned(out.text, out.origin, spaces, replacement);
  return out;
}

}  // namespace

void SplitPreTokenizer::split(const TextPiece& piece, std::vector<TextPiece>& out) const {
  append_ranges(piece, split_ranges(pattern_.find_matches(piece.text), behavior_, invert_), out);
}

WhitespacePreTokenizer::WhitespacePreTokenizer()
    : words_("[" + std::string(kWordClass) + "]+|[^" + kWordClass + R"(\s]+)", /*regex=*/true) {}

void WhitespacePreTokenizer::split(const TextPiece& piece, std::vector<TextPiece>& out) const {
  append_ranges(piece,
                split_ranges(words_.find_matches(piece.text), SplitBehavior::kRemoved,
                             /*invert=*/true),
                out);
}

void CharClassPreTokenizer::split(const TextPiece& piece, std::vector<TextPiece>& out) const {
  append_ranges(piece,
                split_ranges(find_char_matches(piece.text, in_class_), behavior_, /*invert=*/false),
                out);
}

bool is_any_punctuation(char32_t c) {
  return (c < 0x80 && std::ispunct(static_cast<int>(c))) || is_punctuation(c);
}

PrependScheme prepend_scheme(const std::string& name) {
  if (name == "always") return PrependScheme::kAlways;
  if (name == "first") return PrependScheme::kFirst;
  TORCH_CHECK_VALUE(name == "never", "tokenizer.json: Metaspace's prepend_scheme '", name,
                    "' is not one of always, first, never");
  return PrependScheme::kNever;
}

void MetaspacePreTokenizer::split(const TextPiece& piece, std::vector<TextPiece>& out) const {
  TextPiece replaced = replace_spaces(piece, replacement_);
  const bool prepend =
      (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && piece.at_start)) &&
      replaced.text.rfind(replacement_, 0) != 0;
  if (prepend) prepend_aligned(replaced, replacement_);
  if (!split_) {
    out.push_back(std::move(replaced));
    return;
  }
  const Pattern delimiter(replacement_, /*regex=*/false);
  append_ranges(replaced,
                split_ranges(delimiter.find_matches(replaced.text), SplitBehavior::kMergedWithNext,
                             /*invert=*/false),
                out);
}

void PreTokenizerSequence::split(const TextPiece& piece, std::vector<TextPiece>& out) const {
  std::vector<TextPiece> pieces{piece};
  for (const auto& step : steps_) pieces = step->pre_tokenize(pieces);
  out.insert(out.end(), pieces.begin(), pieces.end());
}

}  // namespace detail
}  // namespace mha
