#pragma once

// Private: tokenizers' WordPiece model and decoder (BERT's): each word as the
// longest vocabulary pieces from its start, the later ones with the "##"
// prefix, the whole word the unknown token when a piece is missing
// (tokenizers/src/models/wordpiece/, decoders/wordpiece.rs).

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/pipeline_parts.h"

namespace mha {
namespace detail {

/// tokenizers' `WordPiece` model.
class WordPiece final : public VocabularyModel {
 public:
  /// Throws `c10::Error` when `unk_token` is not in `vocab`.
  WordPiece(std::unordered_map<std::string, int64_t> vocab,
            const std::string& unk_token,
            std::string continuing_subword_prefix,
            int64_t max_input_chars_per_word);

  void tokenize(const std::string& word, std::vector<int64_t>& ids, Spans* spans) const override;
  const std::string& continuing_subword_prefix() const override { return prefix_; }

 private:
  int64_t unk_id_;
  std::string prefix_;
  int64_t max_chars_;
};

/// tokenizers' `WordPiece` decoder: pieces joined to their words, words
/// with spaces, then (`cleanup`) the spaces before punctuation and
/// contractions removed.
class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override;

 private:
  std::string prefix_;
  bool cleanup_;
};

/// No decoder in tokenizer.json: the tokens joined with spaces.
class SpaceJoinDecoder final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override;
};

/// tokenizers' and transformers' `clean_up_tokenization`: " ." -> "." and
/// the like, " n't" -> "n't", " 's" -> "'s", ...; `do_not`: also " do not"
/// -> " don't" (tokenizers' WordPiece decoder does, transformers does not).
std::string clean_up_tokenization(std::string text, bool do_not);

/// The last position `s` at which `clean_up_tokenization` (without `do_not`)
/// of `text` is that of `text[0, s)` and `text[s, ...)` joined, whatever
/// follows `text`; 0 if none. The patterns delete spaces only, so no match
/// crosses a position between two characters that are not spaces and not
/// two adjacent characters of a pattern ("n'", "'t", "'s", "ve", ...).
size_t clean_up_split_point(const std::string& text);

}  // namespace detail
}  // namespace mha
