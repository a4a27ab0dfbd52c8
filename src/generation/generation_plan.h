#pragma once

// Private: what one `generate` call (or one served request) runs with: the
// lengths and special tokens transformers derives from a config
// (`_prepare_generated_length`, `_prepare_special_tokens`) and the logits
// processors it builds (`_get_logits_processor`).

#include <c10/util/Exception.h>
#include <mha/generation_config.h>
#include <mha/logits_processors.h>
#include <mha/stopping_criteria.h>
#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <typeinfo>
#include <vector>

namespace mha {
namespace detail {

/// One `generate` call's config made absolute: lengths, special tokens and
/// the logits processors.
struct GenerationPlan {
  int64_t max_length = 0;          ///< total sequence length at which it stops
  int64_t input_length = 0;        ///< the decoder's input length (prompt, or 1)
  int64_t min_tokens_to_keep = 1;  ///< what top-k and top-p keep at least (beams: more)
  std::vector<int64_t> eos;        ///< end tokens (empty: none)
  std::optional<int64_t> pad;      ///< what finished sequences continue with
  std::optional<int64_t> start;    ///< the decoder start token (encoder-decoder)
  /// Each row's left padding (N) int64, which the repetition penalty skips
  /// (a decoder-only model's attention mask; undefined: none).
  torch::Tensor prompt_padding;
  /// The processors and warpers each step runs (`add_logits_processors`).
  LogitsProcessorList processors;
  /// What ends a sequence (`add_stopping_criteria`).
  StoppingCriteriaList stopping;
  /// Finished sequences continue with `pad` (an `EosTokenCriteria` is in `stopping`).
  bool pads_finished = false;
};

/// The plan of `config` for a decoder input of `input_length` tokens, a model
/// of `vocab_size` tokens and `max_positions` positions, `encoder_decoder`
/// or not, without processors. Throws for an invalid config and for token
/// ids the model cannot embed or score, naming the field.
GenerationPlan plan_generation(const GenerationConfig& config,
                               int64_t input_length,
                               int64_t vocab_size,
                               int64_t max_positions,
                               bool encoder_decoder);

/// Sets `plan.processors` (once its other fields are final): transformers'
/// processors for `config` in its order, the caller's `extra` merged after
/// them (one of a built-in's class replaces it), then with `do_sample` the
/// warpers, and `renormalize_logits`' normalization last.
void add_logits_processors(const GenerationConfig& config,
                           const LogitsProcessorList& extra,
                           GenerationPlan& plan);

/// Sets `plan.stopping` (once its other fields are final): the maximum
/// length, `config`'s stop strings (read with `tokenizer`: a c10::Error
/// without one), the end tokens (if any), then the caller's `extra` merged as
/// `add_logits_processors` merges processors.
void add_stopping_criteria(const GenerationConfig& config,
                           const std::optional<Tokenizer>& tokenizer,
                           const StoppingCriteriaList& extra,
                           GenerationPlan& plan);

/// Which rows of `sequences` (rows, t) `plan.stopping` ends: (rows) bool.
torch::Tensor stops(const GenerationPlan& plan, const torch::Tensor& sequences);

/// transformers' `_merge_criteria_processor_list`: an object of `custom` (of
/// `what`, for the error on a null one) replaces the default of its class;
/// the others follow the defaults.
template <typename T>
std::vector<std::shared_ptr<const T>> merged_by_class(
    const std::vector<std::shared_ptr<const T>>& defaults,
    const std::vector<std::shared_ptr<const T>>& custom,
    const char* what) {
  for (const auto& c : custom) {
    TORCH_CHECK_VALUE(c != nullptr, "generate: a ", what, " of the caller's list is null");
  }
  std::vector<std::shared_ptr<const T>> out;
  std::vector<bool> used(custom.size(), false);
  for (const auto& d : defaults) {
    const auto same = std::find_if(custom.begin(), custom.end(),
                                   [&](const auto& c) { return typeid(*c) == typeid(*d); });
    out.push_back(same == custom.end() ? d : *same);
    if (same != custom.end()) used[same - custom.begin()] = true;
  }
  for (size_t i = 0; i < custom.size(); ++i) {
    if (!used[i]) out.push_back(custom[i]);
  }
  return out;
}

/// `scores` (N, V) float32 of the next token after `sequences` (N, t)
/// through `plan.processors`: a contiguous (N, V) tensor. May write into
/// `scores` (callers pass a tensor of their own).
torch::Tensor process_logits(const GenerationPlan& plan,
                             const torch::Tensor& sequences,
                             torch::Tensor scores);

}  // namespace detail
}  // namespace mha
