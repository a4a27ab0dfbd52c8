#pragma once

// Private: tokenizers' Unigram model (SentencePiece's): the pieces whose
// scores sum highest (Viterbi over the text's bytes, the pieces found by
// prefix), consecutive unknown characters one piece, then each piece its id,
// its bytes' `<0xXX>` tokens (`byte_fallback`) or the unknown id
// (tokenizers/src/models/unigram/model.rs, `encode_optimized` and `tokenize`).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "text/pipeline_parts.h"

namespace mha {
namespace detail {

/// A Unigram model as tokenizer.json's "model" describes it.
class Unigram final : public TokenModel {
 public:
  /// `pieces` (piece, score) by id; `unk_id` the unknown piece (none: a
  /// character outside the pieces is a `c10::Error` at encode, as tokenizers
  /// fails there); `byte_fallback` as BPE's. `c10::Error` for an empty
  /// vocabulary with an unk id or an unk id outside it.
  Unigram(std::vector<std::pair<std::string, double>> pieces,
          std::optional<int64_t> unk_id,
          bool byte_fallback);
  Unigram(const Unigram&) = delete;  // `ids_` views its own pieces
  Unigram& operator=(const Unigram&) = delete;

  void tokenize(const std::string& word, std::vector<int64_t>& ids, Spans* spans) const override;
  const std::string* id_to_token(int64_t id) const override;
  std::optional<int64_t> token_to_id(const std::string& token) const override;
  int64_t size() const override { return static_cast<int64_t>(pieces_.size()); }

 private:
  /// `word`'s best segmentation, byte ranges, unknown runs fused.
  std::vector<std::pair<size_t, size_t>> best_pieces(const std::string& word) const;
  /// Appends the id(s) of the piece `text` to `ids`.
  void append_piece(std::string_view text, std::vector<int64_t>& ids) const;

  std::vector<std::pair<std::string, double>> pieces_;
  std::unordered_map<std::string_view, int64_t> ids_;  ///< views of `pieces_`
  std::optional<int64_t> unk_id_;
  bool byte_fallback_;
  double min_score_ = 0;
  size_t longest_ = 0;  ///< the longest piece's bytes
};

}  // namespace detail
}  // namespace mha
