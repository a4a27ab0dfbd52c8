#include "text/pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <c10/util/Exception.h>
#include <pcre2.h>

#include <algorithm>
#include <optional>

#include "text/utf8.h"

namespace mha {
namespace detail {

namespace {

/// `pattern` with Oniguruma's `\s` (Unicode's White_Space, which has U+0085)
/// spelled for PCRE2, whose `\s` leaves U+0085 out. `\S` inside a class stays.
std::string pcre2_dialect(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += in_class ? R"(\s\x{85})" : R"([\s\x{85}])";
      } else if (next == 'S' && !in_class) {
        out += R"([^\s\x{85}])";
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // a literal ]
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

const pcre2_code* as_code(const std::shared_ptr<const void>& code) {
  return static_cast<const pcre2_code*>(code.get());
}

}  // namespace

SplitBehavior split_behavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  TORCH_CHECK_VALUE(name == "Contiguous", "tokenizer.json: split behavior '", name,
                    "' is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                    "Contiguous");
  return SplitBehavior::kContiguous;
}

Pattern::Pattern(const std::string& text, bool regex) {
  if (!regex) {
    literal_ = text;
    return;
  }
  const std::string source = pcre2_dialect(text);
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_NO_UTF_CHECK | PCRE2_UCP;
  pcre2_code* compiled = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                                       options, &error, &offset, nullptr);
  if (compiled == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    TORCH_CHECK_VALUE(false, "tokenizer.json: the pattern '", text, "' does not compile at offset ",
                      offset, ": ", reinterpret_cast<const char*>(message));
  }
  code_ = std::shared_ptr<const void>(compiled, [](const void* p) {
    pcre2_code_free(static_cast<pcre2_code*>(const_cast<void*>(p)));
  });
}

std::vector<PatternMatch> Pattern::find_matches(const std::string& text) const {
  if (text.empty()) return {{0, 0, false}};
  if (code_ == nullptr) return find_literal(text);
  const std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create_from_pattern(as_code(code_), nullptr), &pcre2_match_data_free);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::vector<PatternMatch> stretches;
  size_t previous = 0, at = 0;
  std::optional<size_t> last_match_end;
  while (at <= text.size()) {
    if (pcre2_match(as_code(code_), subject, text.size(), at, PCRE2_NO_UTF_CHECK, data.get(),
                    nullptr) < 0) {
      break;
    }
    const PCRE2_SIZE* range = pcre2_get_ovector_pointer(data.get());
    // Oniguruma's iterator: no empty match right after the last match.
    if (range[0] == range[1] && last_match_end == range[1]) {
      size_t length = 1;
      if (at < text.size()) code_point_at(text, at, length);
      at += length;
      continue;
    }
    if (previous != range[0]) stretches.push_back({previous, range[0], false});
    stretches.push_back({range[0], range[1], true});
    previous = at = range[1];
    last_match_end = range[1];
  }
  if (previous != text.size()) stretches.push_back({previous, text.size(), false});
  return stretches;
}

std::vector<PatternMatch> Pattern::find_literal(const std::string& text) const {
  if (literal_.empty()) return {{0, text.size(), false}};
  std::vector<PatternMatch> stretches;
  size_t previous = 0;
  for (size_t at = text.find(literal_); at != std::string::npos;
       at = text.find(literal_, at + literal_.size())) {
    if (previous != at) stretches.push_back({previous, at, false});
    stretches.push_back({at, at + literal_.size(), true});
    previous = at + literal_.size();
  }
  if (previous != text.size()) stretches.push_back({previous, text.size(), false});
  return stretches;
}

std::vector<PatternMatch> find_char_matches(const std::string& text,
                                            const std::function<bool(char32_t)>& matches) {
  if (text.empty()) return {{0, 0, false}};
  std::vector<PatternMatch> stretches;
  size_t gap = 0;
  for (size_t at = 0, length = 0; at < text.size(); at += length) {
    if (!matches(code_point_at(text, at, length))) continue;
    if (gap < at) stretches.push_back({gap, at, false});
    stretches.push_back({at, at + length, true});
    gap = at + length;
  }
  if (gap < text.size()) stretches.push_back({gap, text.size(), false});
  return stretches;
}

std::vector<std::pair<size_t, size_t>> split_ranges(std::vector<PatternMatch> stretches,
                                                    SplitBehavior behavior,
                                                    bool invert) {
  if (invert) {
    for (PatternMatch& s : stretches) s.is_match = !s.is_match;
  }
  std::vector<std::pair<size_t, size_t>> ranges;
  bool previous_match = false;
  if (behavior == SplitBehavior::kMergedWithNext) {  // right to left: a match joins what follows
    for (auto s = stretches.rbegin(); s != stretches.rend(); ++s) {
      if (s->is_match && !previous_match && !ranges.empty()) {
        ranges.back().first = s->begin;
      } else {
        ranges.emplace_back(s->begin, s->end);
      }
      previous_match = s->is_match;
    }
    std::reverse(ranges.begin(), ranges.end());
  } else {
    for (const PatternMatch& s : stretches) {
      const bool merge =
          !ranges.empty() &&
          ((behavior == SplitBehavior::kMergedWithPrevious && s.is_match && !previous_match) ||
           (behavior == SplitBehavior::kContiguous && s.is_match == previous_match));
      if (merge) {
        ranges.back().second = s.end;
      } else if (!(behavior == SplitBehavior::kRemoved && s.is_match)) {
        ranges.emplace_back(s.begin, s.end);
      }
      previous_match = s.is_match;
    }
  }
  std::vector<std::pair<size_t, size_t>> kept;
  for (const auto& range : ranges) {
    if (range.second > range.first) kept.push_back(range);
  }
  return kept;
}

}  // namespace detail
}  // namespace mha
