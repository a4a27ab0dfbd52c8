#include "text/added_tokens.h"

#include <algorithm>

#include "text/unicode_classes.h"
#include "text/utf8.h"

namespace mha {
namespace detail {

namespace {

/// The start of the whitespace run that ends at byte `end` of `text`, not
/// before `floor`.
size_t whitespace_before(const std::string& text, size_t end, size_t floor) {
  size_t at = end;
  while (at > floor) {
    size_t start = at - 1;
    while (start > floor && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t length = 0;
    if (!is_white_space(code_point_at(text, start, length))) break;
    at = start;
  }
  return at;
}

/// Whether the character that ends before byte `end` of `text` is a word character.
bool word_char_before(const std::string& text, size_t end) {
  if (end == 0) return false;
  size_t start = end - 1, length = 0;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return is_word_char(code_point_at(text, start, length));
}

/// Whether the character at byte `begin` of `text` is a word character.
bool word_char_at(const std::string& text, size_t begin) {
  size_t length = 0;
  return begin < text.size() && is_word_char(code_point_at(text, begin, length));
}

/// The end of the whitespace run that starts at byte `begin` of `text`.
size_t whitespace_after(const std::string& text, size_t begin) {
  size_t at = begin, length = 0;
  while (at < text.size() && is_white_space(code_point_at(text, at, length))) at += length;
  return at;
}

}  // namespace

AddedTokens::AddedTokens(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    by_id_.emplace(tokens_[i].id, i);
    end_id_ = std::max(end_id_, tokens_[i].id + 1);
    if (!tokens_[i].content.empty()) {
      by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
    }
  }
  for (auto& candidates : by_first_byte_) {  // longest first, the earlier among equals
    std::stable_sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

const AddedToken* AddedTokens::longest_at(const std::string& text,
                                          size_t at,
                                          bool normalized) const {
  for (const size_t i : by_first_byte_[static_cast<unsigned char>(text[at])]) {
    const AddedToken& token = tokens_[i];
    if (token.normalized == normalized &&
        text.compare(at, token.content.size(), token.content) == 0) {
      return &token;
    }
  }
  return nullptr;
}

std::vector<TextSegment> AddedTokens::split(const std::string& text, bool normalized) const {
  std::vector<TextSegment> segments;
  size_t done = 0;  // bytes already in segments
  size_t length = 0;
  for (size_t at = 0; at < text.size() && !tokens_.empty(); at += length) {
    code_point_at(text, at, length);
    const AddedToken* token = longest_at(text, at, normalized);
    if (token == nullptr) continue;
    if (token->single_word &&
        (word_char_before(text, at) || word_char_at(text, at + token->content.size()))) {
      at += token->content.size();  // tokenizers' search goes on after the match
      length = 0;
      continue;
    }
    const size_t begin = token->lstrip ? whitespace_before(text, at, done) : at;
    const size_t end = token->rstrip ? whitespace_after(text, at + token->content.size())
                                     : at + token->content.size();
    if (begin > done) segments.push_back({done, begin, std::nullopt});
    segments.push_back({begin, end, token->id});
    done = end;
    at = end;
    length = 0;
  }
  if (done < text.size()) segments.push_back({done, text.size(), std::nullopt});
  return segments;
}

const AddedToken* AddedTokens::find(int64_t id) const {
  const auto found = by_id_.find(id);
  return found == by_id_.end() ? nullptr : &tokens_[found->second];
}

std::optional<int64_t> AddedTokens::id_of(const std::string& content) const {
  for (const AddedToken& token : tokens_) {
    if (token.content == content) return token.id;
  }
  return std::nullopt;
}

}  // namespace detail
}  // namespace mha
