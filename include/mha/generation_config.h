#pragma once

// The decoding options of a Hugging Face checkpoint, as transformers'
// `GenerationConfig` holds them: read from the directory's
// generation_config.json (else its config.json), with transformers' defaults
// for what the file leaves unset, overridable in code.

#include <torch/arg.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mha {

/// transformers' `early_stopping` (beam search): `true`, `false` or `"never"`.
enum class EarlyStopping { kFalse, kTrue, kNever };

/// transformers' `GenerationConfig` (transformers/generation/configuration_utils.py),
/// the fields mha implements, each with transformers' default
/// (`GenerationConfig._get_default_generation_params`; a token id or a list
/// that defaults to `None` is unset or empty here).
struct GenerationConfig {
  /// Throws the c10::Error transformers' `GenerationConfig.validate` raises
  /// (its wording, the field named), and for values its logits processors
  /// reject (a temperature, top_k, top_p or repetition penalty out of range
  /// when they apply).
  void validate() const;

  /// Total length of a generated sequence (prompt included for decoder-only
  /// models), unless `max_new_tokens` is set. Unset: transformers' default,
  /// 20 tokens after the input, within the model's positions.
  TORCH_ARG(std::optional<int64_t>, max_length) = std::nullopt;
  /// Tokens to generate after the prompt; wins over `max_length`.
  TORCH_ARG(std::optional<int64_t>, max_new_tokens) = std::nullopt;
  /// The end token is suppressed until a sequence has this length.
  TORCH_ARG(int64_t, min_length) = 0;
  /// The end token is suppressed for this many new tokens.
  TORCH_ARG(std::optional<int64_t>, min_new_tokens) = std::nullopt;
  /// Sampling instead of greedy or beam search.
  TORCH_ARG(bool, do_sample) = false;
  /// Beams (1: no beam search).
  TORCH_ARG(int64_t, num_beams) = 1;
  /// Sequences returned per input.
  TORCH_ARG(int64_t, num_return_sequences) = 1;
  /// Beam search's length penalty exponent.
  TORCH_ARG(double, length_penalty) = 1.0;
  /// Beam search's stopping rule.
  TORCH_ARG(EarlyStopping, early_stopping) = EarlyStopping::kFalse;
  /// Sampling temperature.
  TORCH_ARG(double, temperature) = 1.0;
  /// Sampling keeps the `top_k` most likely tokens (0: all).
  TORCH_ARG(int64_t, top_k) = 50;
  /// Sampling keeps the most likely tokens whose probabilities sum to `top_p`.
  TORCH_ARG(double, top_p) = 1.0;
  /// CTRL's repetition penalty (1: none).
  TORCH_ARG(double, repetition_penalty) = 1.0;
  /// No n-gram of this size occurs twice (0: no rule).
  TORCH_ARG(int64_t, no_repeat_ngram_size) = 0;
  /// Token sequences never generated (one or several tokens each).
  TORCH_ARG(std::vector<std::vector<int64_t>>, bad_words_ids) = {};
  /// The token forced first.
  TORCH_ARG(std::optional<int64_t>, forced_bos_token_id) = std::nullopt;
  /// The token(s) forced when `max_length` is reached.
  TORCH_ARG(std::vector<int64_t>, forced_eos_token_id) = {};
  /// Tokens never generated.
  TORCH_ARG(std::vector<int64_t>, suppress_tokens) = {};
  /// Tokens not generated first.
  TORCH_ARG(std::vector<int64_t>, begin_suppress_tokens) = {};
  /// Log-softmax after the logits processors.
  TORCH_ARG(bool, renormalize_logits) = false;
  /// The end token(s).
  TORCH_ARG(std::vector<int64_t>, eos_token_id) = {};
  /// Texts that end a sequence when its text ends in one (transformers'
  /// `StopStringCriteria`, mha/stopping_criteria.h): `generate` then needs
  /// the model's tokenizer.
  TORCH_ARG(std::vector<std::string>, stop_strings) = {};
  /// The padding token (finished sequences continue with it).
  TORCH_ARG(std::optional<int64_t>, pad_token_id) = std::nullopt;
  /// The beginning-of-sequence token.
  TORCH_ARG(std::optional<int64_t>, bos_token_id) = std::nullopt;
  /// An encoder-decoder model's first decoder token.
  TORCH_ARG(std::optional<int64_t>, decoder_start_token_id) = std::nullopt;
};

/// The generation config of the Hugging Face directory `directory`, as
/// transformers' `from_pretrained` gives a model: generation_config.json
/// when present, else the generation fields of config.json, then
/// transformers' defaults for what the file leaves unset; validated. A
/// field of transformers' `GenerationConfig` that mha does not implement
/// (`typical_p`, `num_beam_groups`, `guidance_scale`, ...) set to anything
/// but its default is a c10::Error naming it; bookkeeping fields
/// (`transformers_version`, `use_cache`, ...) and a model's other
/// config.json fields are not options and are ignored.
GenerationConfig read_generation_config(const std::string& directory);

}  // namespace mha
