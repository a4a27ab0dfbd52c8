// mha::Text2TextGenerationPipeline: transformers 4.x's
// pipelines/text2text_generation.py (`_parse_and_tokenize`: the prefix and a
// padded batch; `_forward`: generate; `postprocess`: decode without special
// tokens), with generation/utils.py's streamer step (`streamer.put` after
// each step's tokens) as a stopping criterion that stops nothing.

#include <c10/util/Exception.h>
#include <mha/generation.h>
#include <mha/hf_models.h>
#include <mha/hugging_face.h>
#include <mha/stopping_criteria.h>
#include <mha/text2text_pipeline.h>
#include <torch/types.h>

#include <memory>
#include <utility>

#include "pipelines/batches.h"

namespace mha {

namespace {

/// transformers' streamer step: after each step's tokens, each row's newest
/// tokens through its own `DecodeStream`, the text they complete to the
/// callback. Stops no row.
class TextStreamCriteria final : public StoppingCriteria {
 public:
  /// `rows` sequences, `per_input` of them per input, the first input's index `first_input`.
  TextStreamCriteria(const Tokenizer& tokenizer,
                     int64_t rows,
                     int64_t per_input,
                     size_t first_input,
                     TextPieceCallback on_text)
      : per_input_(per_input), first_input_(first_input), on_text_(std::move(on_text)) {
    streams_.reserve(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) streams_.emplace_back(tokenizer, true);
  }

  /// `input_ids` (rows, t): the tokens after the ones pushed so far, pushed.
  torch::Tensor operator()(const torch::Tensor& input_ids, const torch::Tensor&) const override {
    const torch::Tensor ids = input_ids.contiguous();  // (rows, t)
    const int64_t length = ids.size(1);
    for (int64_t r = 0; r < ids.size(0); ++r) {
      const int64_t* row = ids.data_ptr<int64_t>() + r * length;
      for (int64_t j = pushed_; j < length; ++j) emit(r, streams_[r].push(row[j]));
    }
    pushed_ = length;
    return torch::zeros({ids.size(0)}, torch::kBool);  // (rows)
  }

  /// The text each stream still holds, to the callback.
  void finish() const {
    for (size_t r = 0; r < streams_.size(); ++r)
      emit(static_cast<int64_t>(r), streams_[r].finish());
  }

 private:
  void emit(int64_t row, const std::string& piece) const {
    if (!piece.empty()) on_text_(first_input_ + row / per_input_, row % per_input_, piece);
  }

  int64_t per_input_;
  size_t first_input_;
  TextPieceCallback on_text_;
  mutable std::vector<DecodeStream> streams_;
  mutable int64_t pushed_ = 0;
};

}  // namespace

Text2TextGenerationPipeline::Text2TextGenerationPipeline(const std::string& directory)
    : Text2TextGenerationPipeline(load_hf_model(directory).as<Seq2SeqLM>(),
                                  load_hf_tokenizer(directory),
                                  read_generation_config(directory),
                                  HfConfig::read(directory + "/config.json").string("prefix", "")) {
}

Text2TextGenerationPipeline::Text2TextGenerationPipeline(Seq2SeqLM model,
                                                         Tokenizer tokenizer,
                                                         GenerationConfig generation_config,
                                                         std::string prefix)
    : model_(std::move(model)),
      tokenizer_(std::move(tokenizer)),
      generation_config_(std::move(generation_config)),
      prefix_(std::move(prefix)) {}

GenerationConfig Text2TextGenerationPipeline::call_config(const Text2TextOptions& options) const {
  GenerationConfig config = options.generation_config().value_or(generation_config_);
  if (options.max_new_tokens()) config.max_new_tokens(options.max_new_tokens());
  return config;
}

std::vector<std::vector<std::string>> Text2TextGenerationPipeline::operator()(
    const std::vector<std::string>& texts, const Text2TextOptions& options) const {
  const GenerationConfig config = call_config(options);
  TORCH_CHECK_VALUE(!options.on_text() || config.num_beams() == 1,
                    "Text2TextGenerationPipeline: on_text streams greedy decoding or sampling, "
                    "but the generation config has num_beams ",
                    config.num_beams(), " (beam search changes its best sequences to the end)");
  TORCH_CHECK_VALUE(options.batch_size() == 1 || texts.size() < 2 || tokenizer_.pad_token_id(),
                    "Text2TextGenerationPipeline: a batch of several texts needs the tokenizer's "
                    "pad token, and this tokenizer has none (set batch_size(1))");
  const std::string& prefix = options.prefix() ? *options.prefix() : prefix_;
  std::vector<std::string> sources;
  sources.reserve(texts.size());
  for (const std::string& text : texts) sources.push_back(prefix + text);
  const std::vector<EncodedText> rows =
      detail::encode_for_model(tokenizer_, sources, options.truncation());
  std::vector<std::vector<std::string>> out;
  detail::for_each_batch(rows.size(), options.batch_size(), [&](size_t begin, size_t end) {
    for (auto& texts_of_input : run_batch(rows, begin, end, config, options.on_text())) {
      out.push_back(std::move(texts_of_input));
    }
  });
  return out;
}

std::vector<std::vector<std::string>> Text2TextGenerationPipeline::run_batch(
    const std::vector<EncodedText>& rows,
    size_t begin,
    size_t end,
    const GenerationConfig& config,
    const TextPieceCallback& on_text) const {
  const detail::PaddedBatch batch =
      detail::padded_batch(rows, begin, end, tokenizer_.pad_token_id().value_or(0));
  const int64_t per_input = config.num_return_sequences();
  StoppingCriteriaList criteria;
  std::shared_ptr<const TextStreamCriteria> stream;
  if (on_text) {
    stream = std::make_shared<const TextStreamCriteria>(
        tokenizer_, batch.input_ids.size(0) * per_input, per_input, begin, on_text);
    criteria.push_back(stream);
  }
  Seq2SeqLM model = model_;
  const torch::Tensor sequences =
      generate(model, batch.input_ids, batch.attention_mask, config, std::nullopt, {}, criteria,
               config.stop_strings().empty() ? std::nullopt
                                             : std::optional<Tokenizer>(tokenizer_));  // (B R, T)
  if (stream) stream->finish();
  std::vector<std::vector<std::string>> out(end - begin);
  for (int64_t r = 0; r < sequences.size(0); ++r) {
    const torch::Tensor row = sequences[r].contiguous();  // (T)
    const std::vector<int64_t> ids(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
    out[static_cast<size_t>(r / per_input)].push_back(tokenizer_.decode(ids, true));
  }
  return out;
}

}  // namespace mha
