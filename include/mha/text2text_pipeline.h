#pragma once

// Text in, text out with a sequence-to-sequence language model: summarization,
// translation and any text-to-text task, as transformers 4.x's
// `pipeline("summarization")`, `pipeline("translation")` and
// `pipeline("text2text-generation")` gave it (pipelines/text2text_generation.py;
// transformers 5.x removed them): the config's `prefix` before each text, the
// texts tokenized in padded batches, `generate` with the model's generation
// config, each sequence decoded without special tokens (`batch_decode`). The
// new text can stream to a callback as it is chosen.

#include <mha/generation_config.h>
#include <mha/hf_language_models.h>
#include <mha/tokenizer.h>
#include <torch/arg.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mha {

/// A piece of streamed text: the input's index (in the call's texts), which
/// of its `num_return_sequences` sequences, and the text its newest token completes.
using TextPieceCallback =
    std::function<void(size_t input, int64_t sequence, const std::string& piece)>;

/// The options of one `Text2TextGenerationPipeline` call, with transformers' names.
struct Text2TextOptions {
  /// Replaces the model's generation config (transformers' `generation_config=`).
  TORCH_ARG(std::optional<GenerationConfig>, generation_config) = std::nullopt;
  /// New tokens at most (set on the generation config, as a call argument is).
  TORCH_ARG(std::optional<int64_t>, max_new_tokens) = std::nullopt;
  /// Text put before each input; nullopt: config.json's `prefix` (none without one).
  TORCH_ARG(std::optional<std::string>, prefix) = std::nullopt;
  /// Texts per `generate` call, padded to the longest (a padded batch, as
  /// transformers' tokenizer pads it; results as that batch's).
  TORCH_ARG(int64_t, batch_size) = 8;
  /// Texts cut to the tokenizer's `model_max_length` (transformers'
  /// `truncation=True`); by default none, as the pipeline (a text beyond the
  /// model's positions is an error).
  TORCH_ARG(bool, truncation) = false;
  /// Each sequence's text as it is chosen, a piece at a time (the pieces of a
  /// sequence join to its returned text). Greedy decoding or sampling only:
  /// beam search changes its best sequences to the end (transformers refuses
  /// a streamer there too).
  TORCH_ARG(TextPieceCallback, on_text) = nullptr;
};

/// transformers 4.x's `Text2TextGenerationPipeline` (and its subclasses
/// `SummarizationPipeline`, `TranslationPipeline`, which differ only in the
/// name of the returned field) for a `Seq2SeqLM`: each text's generated texts
/// (`num_return_sequences` of them). Samples draw from the default CPU
/// generator, as transformers draws from the global one: after the same
/// `torch::manual_seed`, the same texts for the same batches.
///
/// Example:
/// ```
/// mha::Text2TextGenerationPipeline summarize("path/to/bart-summarizer");
/// auto summaries = summarize({"A long article ..."},
///                            mha::Text2TextOptions().on_text(
///                                [](size_t, int64_t, const std::string& piece) {
///                                  std::cout << piece << std::flush;
///                                }));
/// ```
class Text2TextGenerationPipeline {
 public:
  /// The model, tokenizer, generation config and config.json's `prefix` of
  /// one directory (`load_hf_model`, `load_hf_tokenizer`, `read_generation_config`).
  explicit Text2TextGenerationPipeline(const std::string& directory);
  /// `model` with `tokenizer`, its `generation_config` and `prefix`.
  Text2TextGenerationPipeline(Seq2SeqLM model,
                              Tokenizer tokenizer,
                              GenerationConfig generation_config,
                              std::string prefix = "");

  /// Each text's generated texts. A batch of more than one text needs the
  /// tokenizer's pad token (transformers' check).
  std::vector<std::vector<std::string>> operator()(const std::vector<std::string>& texts,
                                                   const Text2TextOptions& options = {}) const;

  /// The generation config a call with `options` runs with.
  GenerationConfig call_config(const Text2TextOptions& options) const;

 private:
  /// One padded batch of encoded texts [begin, end): their texts.
  std::vector<std::vector<std::string>> run_batch(const std::vector<EncodedText>& rows,
                                                  size_t begin,
                                                  size_t end,
                                                  const GenerationConfig& config,
                                                  const TextPieceCallback& on_text) const;

  Seq2SeqLM model_;
  Tokenizer tokenizer_;
  GenerationConfig generation_config_;
  std::string prefix_;
};

}  // namespace mha
