#pragma once

// Private: what tokenizers' components split and replace text with, and how
// a split keeps the delimiters (tokenizers/src/tokenizer/pattern.rs,
// normalizer.rs `split`): a regular expression in Oniguruma's dialect (run by
// PCRE2), a literal string, or a character class.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mha {
namespace detail {

/// One stretch of a text: a match of a pattern, or the text between two.
struct PatternMatch {
  size_t begin = 0, end = 0;  ///< bytes
  bool is_match = false;
};

/// tokenizers' `SplitDelimiterBehavior`: what becomes of the matches.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

/// `name` ("Removed", "Isolated", ...) as a behavior; `c10::Error` naming the
/// known ones otherwise.
SplitBehavior split_behavior(const std::string& name);

/// A compiled pattern: regular expression or literal text.
class Pattern {
 public:
  /// `regex`: Oniguruma's dialect as tokenizer.json writes it (`\s` is
  /// Unicode's White_Space, U+0085 included); else `text` matches literally.
  /// `c10::Error` naming the pattern and PCRE2's message when it does not compile.
  Pattern(const std::string& text, bool regex);
  /// `text`'s stretches in order, matches and the gaps between them, as
  /// tokenizers' `find_matches` gives them (empty text: one empty gap).
  std::vector<PatternMatch> find_matches(const std::string& text) const;

 private:
  /// `find_matches` of the literal text (leftmost, not overlapping).
  std::vector<PatternMatch> find_literal(const std::string& text) const;

  std::shared_ptr<const void> code_;  // pcre2_code (a regex), freed by its deleter
  std::string literal_;               // the text (not a regex)
};

/// `text`'s stretches where each character for which `matches` holds is a
/// match of its own (tokenizers' `Fn(char) -> bool` pattern).
std::vector<PatternMatch> find_char_matches(const std::string& text,
                                            const std::function<bool(char32_t)>& matches);

/// The byte ranges [begin, end) that `stretches` become under `behavior`;
/// `invert` swaps matches and gaps first. Empty ranges are left out.
std::vector<std::pair<size_t, size_t>> split_ranges(std::vector<PatternMatch> stretches,
                                                    SplitBehavior behavior,
                                                    bool invert);

}  // namespace detail
}  // namespace mha
