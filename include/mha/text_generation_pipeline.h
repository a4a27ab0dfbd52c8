#pragma once

// Text in, text out with a decoder-only language model, as transformers
// 5.23's `pipeline("text-generation")` gives it (pipelines/text_generation.py):
// each prompt tokenized, continued by `mha::generate` with the model's
// generation config and the pipeline's defaults, the new tokens decoded.

#include <mha/generation_config.h>
#include <mha/hf_language_models.h>
#include <mha/tokenizer.h>
#include <torch/arg.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mha {

/// The options of one `TextGenerationPipeline` call, with transformers' names.
/// `max_new_tokens`, `do_sample` and `temperature`, given, are set as
/// transformers' call arguments are; else the generation config's value,
/// unless that is its default, where the pipeline's default applies:
/// 256 new tokens (unless the config sets `max_length`), sampling, and
/// temperature 0.7 when sampling.
struct TextGenerationOptions {
  /// Replaces the model's generation config (transformers' `generation_config=`).
  TORCH_ARG(std::optional<GenerationConfig>, generation_config) = std::nullopt;
  /// New tokens at most.
  TORCH_ARG(std::optional<int64_t>, max_new_tokens) = std::nullopt;
  /// Sampling (`false`: greedy, or beam search with `num_beams`).
  TORCH_ARG(std::optional<bool>, do_sample) = std::nullopt;
  /// The sampling temperature.
  TORCH_ARG(std::optional<double>, temperature) = std::nullopt;
  /// The prompt, then the new text (`false`: the new text alone).
  TORCH_ARG(bool, return_full_text) = true;
  /// The new text without special tokens.
  TORCH_ARG(bool, skip_special_tokens) = true;
  /// Prompts per `generate` call, padded on the left with the tokenizer's pad
  /// token (masked), as transformers' pipeline batches them; more than 1
  /// needs a pad token. Sampled texts depend on the batches, as there; a
  /// call with several prompts first draws one int64 from the default
  /// generator, as the DataLoader transformers runs a list through does (one
  /// prompt is transformers' call with a string, which draws nothing).
  TORCH_ARG(int64_t, batch_size) = 1;
};

/// transformers' `pipeline("text-generation")` for a `CausalLM`: each prompt's
/// continuations (`num_return_sequences` of them), `batch_size` prompts at a
/// time as transformers' pipeline runs them. Samples draw from the default CPU
/// generator, as transformers draws from the global one: after the same
/// `torch::manual_seed`, the same texts.
///
/// Example:
/// ```
/// mha::TextGenerationPipeline generator("path/to/gpt2");
/// auto texts = generator({"Once upon a time"},
///                        mha::TextGenerationOptions().max_new_tokens(20).do_sample(false));
/// std::cout << texts[0][0] << "\n";
/// ```
class TextGenerationPipeline {
 public:
  /// The model, tokenizer and generation config of one directory
  /// (`load_hf_model`, `load_hf_tokenizer`, `read_generation_config`).
  explicit TextGenerationPipeline(const std::string& directory);
  /// `model` with `tokenizer` and its `generation_config`.
  TextGenerationPipeline(CausalLM model, Tokenizer tokenizer, GenerationConfig generation_config);

  /// Each prompt's texts. A prompt that encodes to no token is a `c10::Error`
  /// (transformers starts it from `bos_token_id`).
  std::vector<std::vector<std::string>> operator()(const std::vector<std::string>& prompts,
                                                   const TextGenerationOptions& options = {}) const;

  /// The generation config a call with `options` runs with.
  GenerationConfig call_config(const TextGenerationOptions& options) const;

 private:
  /// Prompts [begin, end) of `prompts` with their ids, as one left-padded
  /// batch: each one's texts.
  std::vector<std::vector<std::string>> run_batch(const std::vector<std::string>& prompts,
                                                  const std::vector<std::vector<int64_t>>& ids,
                                                  size_t begin,
                                                  size_t end,
                                                  const GenerationConfig& config,
                                                  const TextGenerationOptions& options) const;

  CausalLM model_;
  Tokenizer tokenizer_;
  GenerationConfig generation_config_;
};

}  // namespace mha
