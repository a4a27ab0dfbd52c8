#pragma once

// transformers' logits processors and warpers
// (transformers/generation/logits_process.py) as objects: `generate` builds
// the list a `GenerationConfig` asks for, in transformers' order
// (`_get_logits_processor`), and runs a caller's own processors after its
// processors and before its warpers, a caller's processor replacing the one of
// the same class, as transformers merges a `logits_processor` argument
// (`_merge_criteria_processor_list`).

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace mha {

/// transformers' `LogitsProcessor`: the scores of the next token, processed.
class LogitsProcessor {
 public:
  virtual ~LogitsProcessor() = default;
  /// `scores` (N, V) float32 of the next token after `input_ids` (N, t)
  /// int64 (the decoder's tokens so far; its length is transformers'
  /// `cur_len`) -> the processed scores (N, V). May write into `scores`,
  /// which the caller owns.
  virtual torch::Tensor operator()(const torch::Tensor& input_ids, torch::Tensor scores) const = 0;
};

/// Processors run in order; transformers' `LogitsProcessorList`.
using LogitsProcessorList = std::vector<std::shared_ptr<const LogitsProcessor>>;

/// RepetitionPenaltyLogitsProcessor: each token already in a row (after its
/// first `prompt_ignore_length` (N) int64 positions, when defined) has its
/// score divided by `penalty` when positive, multiplied when negative.
class RepetitionPenaltyLogitsProcessor : public LogitsProcessor {
 public:
  /// `penalty` > 0 (1: none); `prompt_ignore_length` (N) or undefined.
  explicit RepetitionPenaltyLogitsProcessor(double penalty,
                                            torch::Tensor prompt_ignore_length = {});
  /// See `LogitsProcessor`.
  torch::Tensor operator()(const torch::Tensor& input_ids, torch::Tensor scores) const override;

 private:
  double penalty_;
  torch::Tensor prompt_ignore_length_;
};

/// NoRepeatNGramLogitsProcessor: a token that would repeat an n-gram of the row is banned.
class NoRepeatNGramLogitsProcessor : public LogitsProcessor {
 public:
  /// `ngram_size` > 0.
  explicit NoRepeatNGramLogitsProcessor(int64_t ngram_size);
  /// See `LogitsProcessor`.
  torch::Tensor operator()(const torch::Tensor& input_ids, torch::Tensor scores) const override;

 private:
  int64_t n_;
};

/// NoBadWordsLogitsProcessor: a bad word's last token is banned where the
/// row ends with its other tokens; bad words that are one end token
/// (`eos_token_id`) are dropped, as transformers drops them.
class NoBadWordsLogitsProcessor : public LogitsProcessor {
 public:
  /// `bad_words_ids`: one or more tokens each.
  NoBadWordsLogitsProcessor(std::vector<std::vector<int64_t>> bad_words_ids,
                            const std::vector<int64_t>& eos_token_id);
  /// See `LogitsProcessor`.
  torch::Tensor operator()(const torch::Tensor& input_ids, torch::Tensor scores) const override;

 private:
  std::vector<std::vector<int64_t>> words_;
};

/// MinLengthLogitsProcessor: the end tokens are banned while the rows are
/// shorter than `min_length`.
class MinLengthLogitsProcessor : public LogitsProcessor {
 public:
  /// `min_length` tokens in all, `eos_token_id` the end tokens.
  MinLengthLogitsProcessor(int64_t min_length, std::vector<int64_t> eos_token_id);
  /// See `LogitsProcessor`.
  torch::Tensor operator()(const torch::Tensor& input_ids, torch::Tensor scores) const override;

 private:
  int64_t min_length_;
  std::vector<int64_t> eos_;
};

/// MinNewTokensLengthLogitsProcessor: the end tokens are banned until
/// `min_new_tokens` follow the first `prompt_length_to_skip` tokens.
class MinNewTokensLengthLogitsProcessor : public LogitsProcessor {
 public:
  /// The prompt's length, the new tokens before an end, and the end tokens.
  MinNewTokensLengthLogitsProcessor(int64_t prompt_length_to_skip,
                                    int64_t min_new_tokens,
                                    std::vector<int64_t> eos_token_id);
  /// See `LogitsProcessor`.
  torch::Tensor operator()(const torch::Tensor& input_ids, torch::Tensor scores) const override;

 private:
  int64_t min_length_;
  std::vector<int64_t> eos_;
};

/// ForcedBOSTokenLogitsProcessor: the first generated token of an
/// encoder-decoder model (at length 1) is `bos_token_id`.
class ForcedBOSTokenLogitsProcessor : public LogitsProcessor {
 public:
  /// The token forced.
  explicit ForcedBOSTokenLogitsProcessor(int64_t bos_token_id);
  /// See `LogitsProcessor`.
  torch::Tensor operator()(const torch::Tensor& input_ids, torch::Tensor scores) const override;

 private:
  int64_t token_;
};

/// ForcedEOSTokenLogitsProcessor: the last token (at length `max_length` - 1)
/// is one of `eos_token_id`.
class ForcedEOSTokenLogitsProcessor : public LogitsProcessor {
 public:
  /// The sequences' total length and the tokens forced.
  ForcedEOSTokenLogitsProcessor(int64_t max_length, std::vector<int64_t> eos_token_id);
  /// See `LogitsProcessor`.
  torch::Tensor operator()(const torch::Tensor& input_ids, torch::Tensor scores) const override;

 private:
  int64_t max_length_;
  std::vector<int64_t> eos_;
};

/// SuppressTokensLogitsProcessor: `suppress_tokens` never generated.
class SuppressTokensLogitsProcessor : public LogitsProcessor {
 public:
  /// The tokens suppressed.
  explicit SuppressTokensLogitsProcessor(std::vector<int64_t> suppress_tokens);
  /// See `LogitsProcessor`.
  torch::Tensor operator()(const torch::Tensor& input_ids, torch::Tensor scores) const override;

 private:
  std::vector<int64_t> tokens_;
};

/// SuppressTokensAtBeginLogitsProcessor: `begin_suppress_tokens` not
/// generated at length `begin_index`.
class SuppressTokensAtBeginLogitsProcessor : public LogitsProcessor {
 public:
  /// The tokens suppressed and the length at which.
  SuppressTokensAtBeginLogitsProcessor(std::vector<int64_t> begin_suppress_tokens,
                                       int64_t begin_index);
  /// See `LogitsProcessor`.
  torch::Tensor operator()(const torch::Tensor& input_ids, torch::Tensor scores) const override;

 private:
  std::vector<int64_t> tokens_;
  int64_t begin_index_;
};

/// TemperatureLogitsWarper: the scores divided by `temperature`.
class TemperatureLogitsWarper : public LogitsProcessor {
 public:
  /// `temperature` > 0.
  explicit TemperatureLogitsWarper(double temperature);
  /// See `LogitsProcessor`.
  torch::Tensor operator()(const torch::Tensor& input_ids, torch::Tensor scores) const override;

 private:
  double temperature_;
};

/// TopKLogitsWarper: all but the `top_k` best scores (at least
/// `min_tokens_to_keep`) set to -inf.
class TopKLogitsWarper : public LogitsProcessor {
 public:
  /// `top_k` > 0.
  explicit TopKLogitsWarper(int64_t top_k, int64_t min_tokens_to_keep = 1);
  /// See `LogitsProcessor`.
  torch::Tensor operator()(const torch::Tensor& input_ids, torch::Tensor scores) const override;

 private:
  int64_t top_k_;
};

/// TopPLogitsWarper: the fewest best tokens whose probabilities sum above
/// `top_p` (at least `min_tokens_to_keep`) kept, the others set to -inf.
class TopPLogitsWarper : public LogitsProcessor {
 public:
  /// `top_p` in [0, 1].
  explicit TopPLogitsWarper(double top_p, int64_t min_tokens_to_keep = 1);
  /// See `LogitsProcessor`.
  torch::Tensor operator()(const torch::Tensor& input_ids, torch::Tensor scores) const override;

 private:
  double top_p_;
  int64_t keep_;
};

/// LogitNormalization: the log-softmax of the scores (`renormalize_logits`).
class LogitNormalization : public LogitsProcessor {
 public:
  /// See `LogitsProcessor`.
  torch::Tensor operator()(const torch::Tensor& input_ids, torch::Tensor scores) const override;
};

}  // namespace mha
