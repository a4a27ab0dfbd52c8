#pragma once

// Private: transformers' two decoding strategies (transformers/generation/utils.py):
// `_sample` (greedy or sampling) and `_beam_search` (beam search, or beam
// sampling with `do_sample`), as step objects that `generate` and
// `GenerationServer` both drive.

#include <ATen/core/Generator.h>
#include <mha/generation_config.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <optional>

#include "generation/generation_plan.h"

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

/// One decoding strategy of transformers' `generate`, a step at a time, for
/// a caller that runs the model (`generate` over its cache, or
/// `GenerationServer` over its batch): `advance` takes the logits of the next
/// position after `sequences()`, until `done()`.
class Search {
 public:
  virtual ~Search() = default;
  /// The running sequences (rows, t) int64, whose next logits `advance` takes.
  virtual torch::Tensor sequences() const = 0;
  /// One step from `logits` (rows, V) after `sequences()`: the rows'
  /// parents (rows) int64, each a row of the previous `sequences()` by which
  /// the caller reorders its cache (beam search), or undefined where each
  /// row continues itself.
  virtual torch::Tensor advance(const torch::Tensor& logits) = 0;
  /// Whether it has ended (transformers' stopping rules).
  virtual bool done() const = 0;
  /// What `generate` returns: the sequences (the inputs first) and, for beam
  /// search, their scores.
  virtual Decoded result() const = 0;
};

/// transformers' `_sample` one step at a time: from `input_ids` (rows, t0),
/// each step the processed scores' argmax, or with `do_sample` one
/// `multinomial` over every row (finished rows included); finished rows
/// continue with the pad token (with an end-token criterion); it ends when
/// the plan's stopping criteria have ended every row.
class GreedyOrSample final : public Search {
 public:
  /// The decoding of `config` and `plan` from `input_ids` (rows, t0);
  /// samples (`do_sample`) draw from `generator` (none: the default one).
  GreedyOrSample(const GenerationConfig& config,
                 const GenerationPlan& plan,
                 torch::Tensor input_ids,
                 std::optional<at::Generator> generator);
  torch::Tensor sequences() const override { return sequences_; }
  torch::Tensor advance(const torch::Tensor& logits) override;
  bool done() const override { return done_; }
  Decoded result() const override { return {sequences_, torch::Tensor()}; }

 private:
  bool do_sample_;
  GenerationPlan plan_;
  std::optional<at::Generator> generator_;
  torch::Tensor sequences_;   ///< (rows, t)
  torch::Tensor unfinished_;  ///< (rows) int64, 1 while a row runs
  bool done_ = false;
};

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

/// transformers' `_beam_search` one step at a time: from `input_ids`
/// (N * num_beams, t0), each input's rows repeated `num_beams` times;
/// `advance` returns the rows the next step continues from.
class BeamSearch final : public Search {
 public:
  /// The search of `config` and `plan` from `input_ids` (N * B, t0);
  /// samples (`do_sample`) draw from `generator` (none: the default one).
  BeamSearch(const GenerationConfig& config,
             const GenerationPlan& plan,
             const torch::Tensor& input_ids,
             std::optional<at::Generator> generator);
  /// The running hypotheses (N * B, t).
  torch::Tensor sequences() const override;
  /// See `Search`: the running rows' parents (N * B).
  torch::Tensor advance(const torch::Tensor& logits) override;
  bool done() const override { return done_; }
  /// The `num_return_sequences` best hypotheses of each input, best first:
  /// (N * R, T) and their scores (N * R).
  Decoded result() const override;

 private:
  GenerationConfig config_;
  GenerationPlan plan_;
  std::optional<at::Generator> generator_;
  Shape shape_;
  Beams beams_;
  int64_t cur_len_ = 0;
  bool done_ = false;
};

/// The search `config` asks for, from `input_ids` (rows, t0): beam search
/// with `num_beams` > 1 (each input's rows repeated `num_beams` times), else
/// greedy decoding or sampling.
std::unique_ptr<Search> make_search(const GenerationConfig& config,
                                    const GenerationPlan& plan,
                                    const torch::Tensor& input_ids,
                                    const std::optional<at::Generator>& generator);

/// `search` run to its end over the model's `steps`: its result.
Decoded run_search(Search& search, const DecodingSteps& steps);

}  // namespace detail
}  // namespace mha
