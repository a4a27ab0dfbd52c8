#pragma once

// transformers' stopping criteria (transformers/generation/stopping_criteria.py)
// as objects: `generate` builds the list a `GenerationConfig` asks for
// (`_get_stopping_criteria`: the maximum length, the end tokens) and merges a
// caller's own after them, one of a built-in class replacing the config's, as
// transformers merges a `stopping_criteria` argument.

#include <mha/tokenizer.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mha {

/// transformers' `StoppingCriteria`: which sequences are done.
class StoppingCriteria {
 public:
  virtual ~StoppingCriteria() = default;
  /// `input_ids` (rows, t) int64, each row's tokens so far with its newest
  /// last (for beam search: each candidate continuation) -> (rows) bool,
  /// true where that row is done. `scores` is undefined, as transformers
  /// passes `None` without `output_scores`.
  virtual torch::Tensor operator()(const torch::Tensor& input_ids,
                                   const torch::Tensor& scores) const = 0;
};

/// Criteria whose results are or-ed; transformers' `StoppingCriteriaList`.
using StoppingCriteriaList = std::vector<std::shared_ptr<const StoppingCriteria>>;

/// MaxLengthCriteria: every row is done once the rows are `max_length` long.
class MaxLengthCriteria : public StoppingCriteria {
 public:
  /// The total length (prompt or decoder start included).
  explicit MaxLengthCriteria(int64_t max_length);
  /// See `StoppingCriteria`.
  torch::Tensor operator()(const torch::Tensor& input_ids,
                           const torch::Tensor& scores) const override;

 private:
  int64_t max_length_;
};

/// EosTokenCriteria: a row is done when its newest token is an end token.
/// With it, `generate` continues finished rows with the pad token.
class EosTokenCriteria : public StoppingCriteria {
 public:
  /// The end tokens.
  explicit EosTokenCriteria(std::vector<int64_t> eos_token_id);
  /// See `StoppingCriteria`.
  torch::Tensor operator()(const torch::Tensor& input_ids,
                           const torch::Tensor& scores) const override;

 private:
  torch::Tensor eos_;  ///< (K) int64
};

/// StopStringCriteria: a row is done when its text ends in one of
/// `stop_strings`, the newest token's text holding at least the stop string's
/// last character (it may run past it: "stop" ends "...st" "opera"), as
/// transformers' `StopStringCriteria(tokenizer, stop_strings)` decides, with
/// its view of each token's text (a byte-level or byte-fallback token's
/// bytes, else the token's decoded text after other text) and its window (as
/// many of the newest tokens as the longest stop string has characters, or
/// bytes where tokens are bytes). An id without a token breaks a match.
///
/// Example:
/// ```
/// mha::Tokenizer tokenizer = mha::load_hf_tokenizer("path/to/gpt2");
/// mha::StoppingCriteriaList criteria{
///     std::make_shared<mha::StopStringCriteria>(tokenizer, std::vector<std::string>{"\n\n"})};
/// // mha::generate(model, ids, mask, config, std::nullopt, {}, criteria);
/// ```
class StopStringCriteria : public StoppingCriteria {
 public:
  /// Throws `c10::Error` for no stop strings, an empty or non-UTF-8 one, or
  /// when no token can end any of them (transformers' message; a stop string
  /// no token can end while another can is, as there, never matched).
  StopStringCriteria(const Tokenizer& tokenizer, std::vector<std::string> stop_strings);
  /// See `StoppingCriteria`.
  torch::Tensor operator()(const torch::Tensor& input_ids,
                           const torch::Tensor& scores) const override;

 private:
  /// Whether `row`'s newest tokens end in a stop string.
  bool row_stops(const int64_t* row, int64_t length) const;

  std::vector<std::string> stop_strings_;
  std::vector<std::optional<std::string>> token_texts_;  ///< by id
  int64_t window_ = 0;                                   ///< newest tokens a match may span
};

}  // namespace mha
