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

/// A BPE model as tokenizer.json's "model" describes it.
class Bpe final : public VocabularyModel {
 public:
  /// `vocab` token -> id; `merges` in rank order, each pair's merged token in
  /// `vocab` (else `c10::Error` naming the merge); `ignore_merges`: a word in
  /// the vocabulary is one token without merging; `unk_token`: the token of
  /// characters outside the vocabulary (none: they are dropped, as tokenizers does).
  Bpe(std::unordered_map<std::string, int64_t> vocab,
      const std::vector<std::pair<std::string, std::string>>& merges,
      bool ignore_merges,
      std::optional<std::string> unk_token);

  void tokenize(const std::string& word, std::vector<int64_t>& ids) const override;

 private:
  /// A pair of adjacent tokens' merge: its rank and the merged token's id.
  struct Merge {
    int64_t rank;
    int64_t id;
  };
  /// The merge of `left` then `right`, if any.
  const Merge* merge_of(int64_t left, int64_t right) const;
  /// `symbols` (ids) merged lowest rank first, leftmost first among equals.
  std::vector<int64_t> merge_all(std::vector<int64_t> symbols) const;

  std::unordered_map<uint64_t, Merge> merges_;
  bool ignore_merges_;
  std::optional<int64_t> unk_id_;
};

}  // namespace detail
}  // namespace mha
