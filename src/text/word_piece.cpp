#include "text/word_piece.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "text/utf8.h"

namespace mha {
namespace detail {

namespace {

/// `text` with every `from` replaced by `to`, left to right.
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

}  // namespace

WordPiece::WordPiece(std::unordered_map<std::string, int64_t> vocab,
                     const std::string& unk_token,
                     std::string continuing_subword_prefix,
                     int64_t max_input_chars_per_word)
    : VocabularyModel(std::move(vocab)),
      unk_id_(-1),
      prefix_(std::move(continuing_subword_prefix)),
      max_chars_(max_input_chars_per_word) {
  const auto unk = vocab_.id(unk_token);
  TORCH_CHECK_VALUE(unk.has_value(), "WordPiece: unk_token '", unk_token,
                    "' is not in the vocabulary");
  unk_id_ = *unk;
}

void WordPiece::tokenize(const std::string& word, std::vector<int64_t>& ids, Spans* spans) const {
  std::vector<size_t> starts;  // each character's first byte
  for (size_t at = 0, length = 0; at < word.size(); at += length) {
    code_point_at(word, at, length);
    starts.push_back(at);
  }
  auto unknown_word = [&] {
    ids.push_back(unk_id_);
    if (spans != nullptr) spans->emplace_back(0, static_cast<uint32_t>(word.size()));
  };
  if (static_cast<int64_t>(starts.size()) > max_chars_) {
    unknown_word();
    return;
  }
  starts.push_back(word.size());
  std::vector<int64_t> pieces;
  Spans piece_spans;
  for (size_t begin = 0; begin + 1 < starts.size();) {
    size_t end = starts.size() - 1;  // the longest piece first, one character less each try
    std::optional<int64_t> id;
    for (; end > begin; --end) {
      const std::string piece = word.substr(starts[begin], starts[end] - starts[begin]);
      id = vocab_.id(begin > 0 ? prefix_ + piece : piece);
      if (id) break;
    }
    if (!id) {
      unknown_word();  // a word with a missing piece is unknown whole
      return;
    }
    pieces.push_back(*id);
    piece_spans.emplace_back(static_cast<uint32_t>(starts[begin]),
                             static_cast<uint32_t>(starts[end]));
    begin = end;
  }
  ids.insert(ids.end(), pieces.begin(), pieces.end());
  if (spans != nullptr) spans->insert(spans->end(), piece_spans.begin(), piece_spans.end());
}

std::string clean_up_tokenization(std::string text, bool do_not) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{{" .", "."},
                                                                                 {" ?", "?"},
                                                                                 {" !", "!"},
                                                                                 {" ,", ","},
                                                                                 {" ' ", "'"},
                                                                                 {" n't", "n't"},
                                                                                 {" 'm", "'m"}}) {
    text = replace_all(std::move(text), from, to);
  }
  if (do_not) text = replace_all(std::move(text), " do not", " don't");
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}}) {
    text = replace_all(std::move(text), from, to);
  }
  return text;
}

size_t clean_up_split_point(const std::string& text) {
  static const std::vector<std::string> joined = {"n'", "'t", "'m", "'s", "'v", "ve", "'r", "re"};
  for (size_t s = text.size(); s-- > 1;) {
    const char before = text[s - 1], after = text[s];
    const bool continuation = (static_cast<unsigned char>(after) & 0xC0) == 0x80;  // mid-character
    if (before == ' ' || after == ' ' || continuation) continue;
    if (std::find(joined.begin(), joined.end(), std::string{before, after}) == joined.end()) {
      return s;
    }
  }
  return 0;
}

std::vector<std::string> WordPieceDecoder::decode_chain(std::vector<std::string> tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string& token = tokens[i];
    if (i > 0) {
      token = token.rfind(prefix_, 0) == 0 ? token.substr(prefix_.size()) : " " + token;
    }
    if (cleanup_) token = clean_up_tokenization(std::move(token), /*do_not=*/true);
  }
  return tokens;
}

std::vector<std::string> SpaceJoinDecoder::decode_chain(std::vector<std::string> tokens) const {
  std::string text;
  for (size_t i = 0; i < tokens.size(); ++i) text += (i > 0 ? " " : "") + tokens[i];
  return {text};
}

}  // namespace detail
}  // namespace mha
