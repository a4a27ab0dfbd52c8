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

/// transformers' `_sample`: from `sequences` (rows, t0), each step the
/// processed scores' argmax, or with `do_sample` one `multinomial` over every
/// row (finished rows included); finished rows continue with the pad token.
Decoded greedy_or_sample(const GenerationConfig& config,
                         const GenerationPlan& plan,
                         torch::Tensor sequences,
                         const std::optional<at::Generator>& generator,
                         const DecodingSteps& steps);

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
