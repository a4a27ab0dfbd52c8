#pragma once

// Private: tokenizers' BPE model: a vocabulary and ranked merges, applied to
// each pre-tokenized word lowest rank first (tokenizers/src/models/bpe/).

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "text/pipeline_parts.h"

namespace mha {
namespace detail {

/// A BPE model's options, as tokenizer.json's "model" names them.
struct BpeOptions {
  /// A word in the vocabulary is one token, without merging.
  bool ignore_merges = false;
  /// The token of characters outside the vocabulary (none: they are dropped,
  /// as tokenizers does).
  std::optional<std::string> unk_token;
  /// Consecutive unknown characters are one unknown token.
  bool fuse_unk = false;
  /// A character outside the vocabulary is its bytes' `<0xXX>` tokens, where
  /// the vocabulary has them all.
  bool byte_fallback = false;
  /// Before every character of a word but the first (as the vocabulary writes them).
  std::string continuing_subword_prefix;
  /// After a word's last character.
  std::string end_of_word_suffix;
};

/// A BPE model as tokenizer.json's "model" describes it.
class Bpe final : public VocabularyModel {
 public:
  /// `vocab` token -> id; `merges` in rank order, each pair's merged token in
  /// `vocab` (else `c10::Error` naming the merge).
  Bpe(std::unordered_map<std::string, int64_t> vocab,
      const std::vector<std::pair<std::string, std::string>>& merges,
      BpeOptions options);

  void tokenize(const std::string& word, std::vector<int64_t>& ids, Spans* spans) const override;
  const std::string& continuing_subword_prefix() const override {
    return options_.continuing_subword_prefix;
  }

 private:
  /// A pair of adjacent tokens' merge: its rank and the merged token's id.
  struct Merge {
    int64_t rank;
    int64_t id;
  };
  /// The merge of `left` then `right`, if any.
  const Merge* merge_of(int64_t left, int64_t right) const;
  /// `symbols` (ids) merged lowest rank first, leftmost first among equals;
  /// `lengths` (the symbols' bytes in the word), unless null, merged with them.
  std::vector<int64_t> merge_all(std::vector<int64_t> symbols,
                                 std::vector<uint32_t>* lengths) const;

  /// `word`'s characters as ids, before merging (tokenizers' `merge_word`),
  /// and their bytes in the word (a `<0xXX>` token: one) in `lengths`.
  std::vector<int64_t> initial_symbols(const std::string& word,
                                       std::vector<uint32_t>& lengths) const;
  /// Appends the `<0xXX>` ids of `text`'s bytes to `ids`; false (nothing
  /// appended) where the vocabulary lacks one.
  bool append_byte_tokens(const std::string& text, std::vector<int64_t>& ids) const;

  std::unordered_map<uint64_t, Merge> merges_;
  BpeOptions options_;
  std::optional<int64_t> unk_id_;
};

}  // namespace detail
}  // namespace mha
