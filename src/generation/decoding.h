#pragma once

// Private: transformers' two decoding loops over a model's cached steps
// (transformers/generation/utils.py): `_sample` (greedy or sampling) and
// `_beam_search` (beam search, or beam sampling with `do_sample`).

#include <ATen/core/Generator.h>
#include <mha/generation_config.h>
#include <torch/types.h>

#include <functional>
#include <optional>

#include "generation/logits_processors.h"

namespace mha {
namespace detail {

/// A language model's cached decoding steps, one row per sequence.
struct DecodingSteps {
  /// The next position's logits (rows, V) after `sequences` (rows, t); the
  /// model has seen every token but those the last calls did not pass.
  std::function<torch::Tensor(const torch::Tensor& sequences)> next_logits;
  /// Keeps the cached rows `index` (rows) int64, in that order (beam search).
  std::function<void(const torch::Tensor& index)> reorder;
};

/// What one decoding loop returns.
struct Decoded {
  torch::Tensor sequences;         ///< (rows, T) int64, the inputs first
  torch::Tensor sequences_scores;  ///< beam search: (rows) float32; else undefined
};

/// transformers' `_sample` choice of each row's next token (rows) int64 from
/// `logits` (rows, V) after `sequences` (rows, t): the processed scores'
/// argmax, or with `do_sample` one `multinomial` over every row.
torch::Tensor next_tokens(const GenerationConfig& config,
                          const GenerationPlan& plan,
                          const torch::Tensor& sequences,
                          const torch::Tensor& logits,
                          const std::optional<at::Generator>& generator);

/// transformers' `_sample`: from `sequences` (rows, t0), each step the
/// processed scores' argmax, or with `do_sample` one `multinomial` over every
/// row (finished rows included); finished rows continue with the pad token.
Decoded greedy_or_sample(const GenerationConfig& config,
                         const GenerationPlan& plan,
                         torch::Tensor sequences,
                         const std::optional<at::Generator>& generator,
                         const DecodingSteps& steps);

/// The state of a beam search, per input (N) and beam (B): running
/// hypotheses and finished ones, transformers' tensors of the same names.
struct Beams {
  torch::Tensor running_sequences;     ///< (N, B, max_length) int64
  torch::Tensor running_beam_scores;   ///< (N, B) float32
  torch::Tensor running_beam_indices;  ///< (N, B, max_length - t0) int32
  torch::Tensor sequences;             ///< (N, B, max_length) int64, the finished
  torch::Tensor beam_scores;           ///< (N, B) float32
  torch::Tensor beam_indices;          ///< (N, B, max_length - t0) int32
  torch::Tensor is_sent_finished;      ///< (N, B) bool
  torch::Tensor improvable;            ///< (N, 1) bool: `is_early_stop_heuristic_unsatisfied`
  torch::Tensor hits_stop;             ///< (N, K) bool: `next_token_hits_stopping_criteria`
};

/// A beam search's fixed sizes.
struct Shape {
  int64_t batch = 0;       ///< N
  int64_t beams = 0;       ///< B
  int64_t keep = 0;        ///< K: candidates kept per step
  int64_t prompt = 0;      ///< t0: `decoder_prompt_len`
  int64_t max_length = 0;  ///< the sequences' capacity
};

/// transformers' `_beam_search` one step at a time, for a caller that runs
/// the model: from `input_ids` (N * num_beams, t0), each input's rows
/// repeated `num_beams` times, `advance` takes the logits of the next
/// position after `sequences()` and returns the rows the next step
/// continues from, by which the caller reorders its cache; until `done()`.
class BeamSearch {
 public:
  /// The search of `config` and `plan` from `input_ids` (N * B, t0);
  /// samples (`do_sample`) draw from `generator` (none: the default one).
  BeamSearch(const GenerationConfig& config,
             const GenerationPlan& plan,
             const torch::Tensor& input_ids,
             std::optional<at::Generator> generator);
  /// The running hypotheses (N * B, t) int64, whose next logits `advance` takes.
  torch::Tensor sequences() const;
  /// One step from `logits` (N * B, V) after `sequences()`: the running
  /// rows' parents (N * B) int64, each a row of the previous `sequences()`.
  torch::Tensor advance(const torch::Tensor& logits);
  /// Whether the search has ended (transformers' stopping rules).
  bool done() const { return done_; }
  /// The `num_return_sequences` best hypotheses of each input, best first:
  /// (N * R, T) and their scores (N * R).
  Decoded result() const;

 private:
  GenerationConfig config_;
  GenerationPlan plan_;
  std::optional<at::Generator> generator_;
  Shape shape_;
  Beams beams_;
  int64_t cur_len_ = 0;
  bool done_ = false;
};

/// transformers' `_beam_search` from `input_ids` (N * num_beams, t0), each
/// input's rows repeated `num_beams` times: the best
/// `num_return_sequences` hypotheses of each input, best first, (N * R, T)
/// with their scores (N * R).
Decoded beam_search(const GenerationConfig& config,
                    const GenerationPlan& plan,
                    const torch::Tensor& input_ids,
                    const std::optional<at::Generator>& generator,
                    const DecodingSteps& steps);

}  // namespace detail
}  // namespace mha
