#pragma once

// transformers' `generate` for mha's whole language models (`Seq2SeqLM`,
// `CausalLM`), token for token from the same `GenerationConfig`
// (mha/generation_config.h): greedy decoding and sampling with transformers'
// logits processors and warpers, in transformers' order; beam search with
// transformers' scorer (its candidates, finishing, early-stopping and
// length-penalty rules, `num_return_sequences` best first), and beam sampling
// with `do_sample`; several sampled sequences per input.
//
// Random numbers: with `do_sample`, each step draws one `multinomial` over
// all rows' probabilities (finished rows included; with beams, over each
// input's beams x vocabulary), from `generator` or, without one, from the
// default CPU generator, exactly as transformers' `generate` draws from the
// global generator: the same seed gives transformers' samples for the same
// batch.

#include <ATen/core/Generator.h>
#include <mha/generation_config.h>
#include <mha/hf_language_models.h>
#include <mha/logits_processors.h>
#include <mha/stopping_criteria.h>
#include <torch/types.h>

#include <optional>
#include <type_traits>

namespace mha {

/// What `generate_with_scores` returns: transformers' `generate(...)` with
/// `return_dict_in_generate=True` and `output_scores=True`, less the per-step scores.
struct GenerateOutput {
  /// The sequences `generate` returns.
  torch::Tensor sequences;
  /// Beam search: each returned sequence's length-penalized log-probability
  /// (N * num_return_sequences) float32, transformers' `sequences_scores`;
  /// undefined without beams.
  torch::Tensor sequences_scores;
};

namespace detail {

/// One `generate_with_scores` call's arguments but the model; the optional
/// ones (copies of the caller's: the lists hold shared pointers) default as
/// `generate`'s do.
struct GenerateCall {
  const torch::Tensor& input_ids;
  const torch::Tensor& attention_mask;
  const GenerationConfig& config;
  std::optional<at::Generator> generator = std::nullopt;
  LogitsProcessorList logits_processor = {};
  StoppingCriteriaList stopping_criteria = {};
  std::optional<Tokenizer> tokenizer = std::nullopt;
};

/// `generate_with_scores` of a sequence-to-sequence LM.
GenerateOutput generate_for(Seq2SeqLM& model, const GenerateCall& call);
/// `generate_with_scores` of a decoder-only LM.
GenerateOutput generate_for(CausalLM& model, const GenerateCall& call);

}  // namespace detail

/// transformers' `model.generate(...)` with `return_dict_in_generate=True`
/// and `output_scores=True`: `generate`'s arguments (below), its sequences
/// and their scores. The optional arguments are objects of their types (an
/// `mha::LogitsProcessorList{...}`, not a braced list, which does not deduce).
template <typename LanguageModel, typename... Optional>
GenerateOutput generate_with_scores(LanguageModel& model,
                                    const torch::Tensor& input_ids,
                                    const torch::Tensor& attention_mask,
                                    const GenerationConfig& config,
                                    const Optional&... generator_processors_criteria_tokenizer) {
  static_assert(std::is_same_v<LanguageModel, Seq2SeqLM> || std::is_same_v<LanguageModel, CausalLM>,
                "mha::generate and mha::generate_with_scores take a mha::Seq2SeqLM or a "
                "mha::CausalLM");
  static_assert(sizeof...(Optional) <= 4,
                "mha::generate_with_scores: after the config, at most a generator, a "
                "LogitsProcessorList, a StoppingCriteriaList and a Tokenizer");
  return detail::generate_for(model,
                              detail::GenerateCall{input_ids, attention_mask, config,
                                                   generator_processors_criteria_tokenizer...});
}

/// transformers' `model.generate(input_ids, attention_mask=mask, generation_config=config)`
/// for a `Seq2SeqLM` or a `CausalLM`: the sequences.
///
/// A sequence-to-sequence LM: `input_ids` (N, S) the sources,
/// `attention_mask` (N, S) 1 for tokens and 0 for padding (undefined: none).
/// Its sequences are (N * R, T) int64, R = `num_return_sequences`
/// consecutive rows per input: the decoder start token, then the generated
/// tokens; a sequence that ended continues with `pad_token_id` until the last
/// one ends or `max_length` is reached, as transformers returns them (beam
/// search: the best hypotheses, padded as transformers pads them).
///
/// A decoder-only LM: `input_ids` (N, L) left-padded prompts,
/// `attention_mask` (N, L) 1 for tokens and 0 for the padding (undefined:
/// none), positions counted over the mask as transformers' `generate`
/// counts them. Its sequences are (N * R, L + T) int64: the prompts, then
/// the generated tokens (finished sequences padded as above).
///
/// Samples (`do_sample`) draw from `generator`, or from the default CPU
/// generator without one. `logits_processor` and `stopping_criteria`: the
/// caller's own, transformers' arguments of those names
/// (mha/logits_processors.h, mha/stopping_criteria.h: processors run after
/// the config's processors and before its warpers, criteria after the
/// config's; one of a built-in class replaces the config's). `tokenizer`:
/// the model's, transformers' argument of that name, needed (and used) only
/// where `config` has `stop_strings`. Runs under
/// `torch::NoGradGuard`, on the CPU (a model or `input_ids` elsewhere is a
/// c10::Error).
template <typename LanguageModel>
torch::Tensor generate(LanguageModel& model,
                       const torch::Tensor& input_ids,
                       const torch::Tensor& attention_mask,
                       const GenerationConfig& config,
                       const std::optional<at::Generator>& generator = std::nullopt,
                       const LogitsProcessorList& logits_processor = {},
                       const StoppingCriteriaList& stopping_criteria = {},
                       const std::optional<Tokenizer>& tokenizer = std::nullopt) {
  return generate_with_scores(model, input_ids, attention_mask, config, generator, logits_processor,
                              stopping_criteria, tokenizer)
      .sequences;
}

}  // namespace mha
