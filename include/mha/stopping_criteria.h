#pragma once

// transformers' stopping criteria (transformers/generation/stopping_criteria.py)
// as objects: `generate` builds the list a `GenerationConfig` asks for
// (`_get_stopping_criteria`: the maximum length, the end tokens) and merges a
// caller's own after them, one of a built-in class replacing the config's, as
// transformers merges a `stopping_criteria` argument.

#include <torch/types.h>

#include <cstdint>
#include <memory>
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

}  // namespace mha
