#pragma once

// Text in, answers out, as transformers 5.23's `pipeline(task)` gives them
// (pipelines/text_classification.py, pipelines/token_classification.py): a
// task model (`mha/hf_task_models.h`) and its tokenizer, many texts at once,
// padded into batches.

#include <mha/hf_task_models.h>
#include <mha/tokenizer.h>
#include <torch/arg.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mha {

namespace detail {

/// What the text pipelines hold: a task model checked for their task, and its tokenizer.
class TextTaskPipeline {
 protected:
  /// The model and tokenizer of `directory`; `c10::Error` naming the
  /// pipeline of `task` unless the model's task is `task`.
  TextTaskPipeline(const std::string& directory, HfTask task);
  /// `model` (checked as above) with `tokenizer`.
  TextTaskPipeline(TextTaskModel model, Tokenizer tokenizer, HfTask task);

  TextTaskModel model_;
  Tokenizer tokenizer_;
};

}  // namespace detail

/// A label and its score.
struct LabelScore {
  std::string label;
  double score = 0.0;
};

/// How class scores come from logits: transformers' `function_to_apply`.
enum class ScoreFunction {
  /// By the model's config: none for `problem_type` "regression"; sigmoid for
  /// "multi_label_classification" or one label; softmax otherwise.
  kDefault,
  kSigmoid,
  kSoftmax,
  kNone,
};

/// Options of `TextClassificationPipeline`.
struct TextClassificationOptions {
  /// The `top_k` best labels, best first (ties in label order); nullopt: all
  /// (transformers' `top_k=None`).
  TORCH_ARG(std::optional<int64_t>, top_k) = 1;
  /// transformers' `function_to_apply`.
  TORCH_ARG(ScoreFunction, function_to_apply) = ScoreFunction::kDefault;
  /// Texts per model call, padded to the longest (results as one by one).
  TORCH_ARG(int64_t, batch_size) = 8;
  /// Texts cut to the tokenizer's `model_max_length` (transformers'
  /// `truncation=True`); by default, as transformers, none (a text beyond
  /// the model's positions is an error).
  TORCH_ARG(bool, truncation) = false;
};

/// transformers' `pipeline("text-classification")`: each text's labels and
/// scores from a `...ForSequenceClassification` model.
///
/// Example:
/// ```
/// mha::TextClassificationPipeline classify("path/to/sentiment-model");
/// for (const auto& best : classify({"I love this.", "Not my taste."}))
///   std::cout << best[0].label << " " << best[0].score << "\n";
/// ```
class TextClassificationPipeline : detail::TextTaskPipeline {
 public:
  /// The model and tokenizer of one directory (`load_hf_model`, `load_hf_tokenizer`).
  explicit TextClassificationPipeline(const std::string& directory)
      : TextTaskPipeline(directory, HfTask::kSequenceClassification) {}
  /// `model` (sequence classification) with `tokenizer`.
  TextClassificationPipeline(TextTaskModel model, Tokenizer tokenizer)
      : TextTaskPipeline(std::move(model), std::move(tokenizer), HfTask::kSequenceClassification) {}

  /// Each text's labels (`options.top_k` of them).
  std::vector<std::vector<LabelScore>> operator()(
      const std::vector<std::string>& texts, const TextClassificationOptions& options = {}) const;
  /// Each pair's labels: transformers' `classifier({"text": text, "text_pair":
  /// pair})` for each (text, pair), as a sentence-pair model (natural language
  /// inference, paraphrase) reads them; `c10::Error` unless one pair per text.
  std::vector<std::vector<LabelScore>> operator()(
      const std::vector<std::string>& texts,
      const std::vector<std::string>& text_pairs,
      const TextClassificationOptions& options = {}) const;

 private:
  std::vector<std::vector<LabelScore>> classify(const std::vector<EncodedText>& rows,
                                                const TextClassificationOptions& options) const;
};

/// How token classification joins tokens into entities: transformers' `aggregation_strategy`.
enum class AggregationStrategy {
  kNone,     ///< each token, its best label
  kSimple,   ///< adjacent tokens of one entity (B-X then I-X ...) grouped
  kFirst,    ///< each word labelled by its first token, then grouped
  kAverage,  ///< each word by its tokens' mean scores, then grouped
  kMax,      ///< each word by its most confident token, then grouped
};

/// One entity (or, without aggregation, one token) of a text.
struct Entity {
  /// The label (`entity` without aggregation, `entity_group` with: B-/I- removed).
  std::string label;
  /// Its score (the mean over a group's tokens or words).
  double score = 0.0;
  /// The token's index in the ids (without aggregation), else -1.
  int64_t index = -1;
  /// Its text as the tokenizer gives it (a token without aggregation).
  std::string word;
  /// Its characters [start, end) in the text (code points, as Python counts).
  int64_t start = 0;
  int64_t end = 0;
};

/// Options of `TokenClassificationPipeline`.
struct TokenClassificationOptions {
  /// transformers' `aggregation_strategy`.
  TORCH_ARG(AggregationStrategy, aggregation_strategy) = AggregationStrategy::kNone;
  /// Labels left out of the answer (transformers' `ignore_labels`).
  TORCH_ARG(std::vector<std::string>, ignore_labels) = std::vector<std::string> { "O" };
  /// Texts (with `stride`: windows) per model call, padded to the longest
  /// (results as one by one).
  TORCH_ARG(int64_t, batch_size) = 8;
  /// A text longer than the tokenizer's `model_max_length` runs in windows of
  /// that many tokens, each sharing `stride` tokens with the one before
  /// (transformers' `stride`): each window's entities, then of overlapping
  /// ones the longest (the better score at equal length). Needs an
  /// aggregation strategy other than none, as transformers does; nullopt:
  /// the text is truncated.
  TORCH_ARG(std::optional<int64_t>, stride) = std::nullopt;
};

/// transformers' `pipeline("token-classification")` (named entities): each
/// text's entities with their characters, from a `...ForTokenClassification` model.
///
/// Example:
/// ```
/// mha::TokenClassificationPipeline ner("path/to/ner-model");
/// auto options = mha::TokenClassificationOptions().aggregation_strategy(
///     mha::AggregationStrategy::kSimple);
/// for (const mha::Entity& e : ner({"Ada Lovelace lived in London."}, options)[0])
///   std::cout << e.label << ": " << e.word << " [" << e.start << ", " << e.end << ")\n";
/// ```
class TokenClassificationPipeline : detail::TextTaskPipeline {
 public:
  /// The model and tokenizer of one directory (`load_hf_model`, `load_hf_tokenizer`).
  explicit TokenClassificationPipeline(const std::string& directory)
      : TextTaskPipeline(directory, HfTask::kTokenClassification) {}
  /// `model` (token classification) with `tokenizer`.
  TokenClassificationPipeline(TextTaskModel model, Tokenizer tokenizer)
      : TextTaskPipeline(std::move(model), std::move(tokenizer), HfTask::kTokenClassification) {}

  /// Each text's entities, in text order. Texts longer than the tokenizer's
  /// `model_max_length` are truncated, as transformers does, or run in
  /// windows (`stride`).
  std::vector<std::vector<Entity>> operator()(const std::vector<std::string>& texts,
                                              const TokenClassificationOptions& options = {}) const;

 private:
  /// Each text's windows (one unless `stride` is set), as the model reads them.
  std::vector<std::vector<EncodedText>> windows(const std::vector<std::string>& texts,
                                                const TokenClassificationOptions& options) const;
};

/// One answer span of a context.
struct Answer {
  double score = 0.0;  ///< the start's probability times the end's
  int64_t start = 0;   ///< its characters [start, end) in the context (code points)
  int64_t end = 0;
  std::string answer;  ///< the context's characters [start, end)
};

/// Options of `QuestionAnsweringPipeline` (transformers 4.x's defaults).
struct QuestionAnsweringOptions {
  /// The best `top_k` answers, best first.
  TORCH_ARG(int64_t, top_k) = 1;
  /// Tokens a window of the question and the context holds; 0: the smaller
  /// of 384 and the tokenizer's `model_max_length`.
  TORCH_ARG(int64_t, max_seq_len) = 0;
  /// Tokens of context consecutive windows share; 0: the smaller of 128 and
  /// half of `max_seq_len`.
  TORCH_ARG(int64_t, doc_stride) = 0;
  /// The longest answer in tokens.
  TORCH_ARG(int64_t, max_answer_len) = 15;
  /// Also the empty answer (score: the smallest of the windows' first-token
  /// probabilities' products), ranked with the others.
  TORCH_ARG(bool, handle_impossible_answer) = false;
  /// An answer's characters widened to the whole words its first and last
  /// tokens are in (`false`: the tokens' own characters).
  TORCH_ARG(bool, align_to_words) = true;
  /// Windows per model call, padded to the longest.
  TORCH_ARG(int64_t, batch_size) = 8;
};

/// Extractive question answering with a `...ForQuestionAnswering` model:
/// transformers 4.x's `pipeline("question-answering")` (the task 5.x's
/// `pipeline` no longer has): the context cut into
/// windows of `max_seq_len` tokens sharing `doc_stride`, each window's start
/// and end probabilities over the context's tokens (and the first token),
/// the best spans of at most `max_answer_len` tokens, as characters.
///
/// Example:
/// ```
/// mha::QuestionAnsweringPipeline qa("path/to/squad-model");
/// auto best = qa({"Where do penguins live?"}, {"Penguins live in the southern hemisphere."});
/// std::cout << best[0][0].answer << " (" << best[0][0].score << ")\n";
/// ```
class QuestionAnsweringPipeline : detail::TextTaskPipeline {
 public:
  /// The model and tokenizer of one directory (`load_hf_model`, `load_hf_tokenizer`).
  explicit QuestionAnsweringPipeline(const std::string& directory)
      : TextTaskPipeline(directory, HfTask::kQuestionAnswering) {}
  /// `model` (question answering) with `tokenizer`.
  QuestionAnsweringPipeline(TextTaskModel model, Tokenizer tokenizer)
      : TextTaskPipeline(std::move(model), std::move(tokenizer), HfTask::kQuestionAnswering) {}

  /// Each (question, context)'s answers; `questions` and `contexts` pair up by index.
  std::vector<std::vector<Answer>> operator()(const std::vector<std::string>& questions,
                                              const std::vector<std::string>& contexts,
                                              const QuestionAnsweringOptions& options = {}) const;
};

}  // namespace mha
