#pragma once

// Fine-tuned encoders with their task heads, as transformers 5.23's
// `...ForSequenceClassification`, `...ForTokenClassification`,
// `...ForQuestionAnswering` (bert, roberta, distilbert, electra) and
// `ViTForImageClassification`, `DeiTForImageClassification[WithTeacher]` run
// them: `load_hf_model` makes them from a directory whose config.json names
// such a class in `architectures`. Each holds its base model (`model`) and
// the head's layers; the labels (`id2label`) and `problem_type` come with it.

#include <mha/hf_encoder_models.h>
#include <torch/arg.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace mha {

/// A task head on an encoder.
enum class HfTask {
  kSequenceClassification,  ///< a text's labels: logits (N, num_labels)
  kTokenClassification,     ///< each token's labels: logits (N, L, num_labels)
  kQuestionAnswering,       ///< an answer span: start_logits and end_logits (N, L)
  kImageClassification,     ///< an image's labels: logits (N, num_labels)
};

/// transformers' name of the task's classes' suffix ("ForSequenceClassification", ...).
std::string hf_task_name(HfTask task);

/// What a task model returns (transformers' `SequenceClassifierOutput`,
/// `TokenClassifierOutput`, `QuestionAnsweringModelOutput`,
/// `ImageClassifierOutput`); the fields the task has not are undefined.
struct TaskModelOutput {
  /// (N, num_labels) for a text's or an image's classes, (N, L, num_labels) for tokens'.
  torch::Tensor logits;
  /// Question answering: (N, L) each token's score as the answer's first.
  torch::Tensor start_logits;
  /// Question answering: (N, L) each token's score as the answer's last.
  torch::Tensor end_logits;
};

/// Options of `mha::TextTaskModel`: the base model, the task and its labels.
struct TextTaskModelOptions {
  /// `encoder`: the base model's options (for sequence classification,
  /// BERT's needs its pooler); `num_labels` the head's outputs (2 for
  /// question answering: start and end).
  TextTaskModelOptions(TextEncoderModelOptions encoder, HfTask task, int64_t num_labels)
      : encoder_(std::move(encoder)), task_(task), num_labels_(num_labels) {}
  /// The base model's options.
  TORCH_ARG(TextEncoderModelOptions, encoder);
  /// The task (not image classification).
  TORCH_ARG(HfTask, task);
  /// The head's outputs.
  TORCH_ARG(int64_t, num_labels);
  /// Each label's name by id (config.json's `id2label`; LABEL_0, LABEL_1, ... when absent).
  TORCH_ARG(std::vector<std::string>, id2label);
  /// config.json's `problem_type`: "single_label_classification",
  /// "multi_label_classification", "regression", or "" when unset.
  TORCH_ARG(std::string, problem_type);
};

/// A text encoder with a task head. The sequence classification head is each
/// family's own: BERT's classifier on the pooler's output; RoBERTa's `dense`,
/// tanh, `classifier` (its `out_proj`) on the first token; ELECTRA's the same
/// with GELU; DistilBERT's `dense` (its `pre_classifier`), ReLU, `classifier`
/// on the first token. Token classification and question answering: one
/// linear layer (`classifier`; `qa_outputs` in the file) on every token.
class TextTaskModelImpl : public detail::WholeModel<TextTaskModelImpl> {
 public:
  /// Builds the submodules (random weights; `load_hf_model` loads a checkpoint's).
  explicit TextTaskModelImpl(TextTaskModelOptions options_) : options(std::move(options_)) {
    reset();
  }

  /// transformers' `model(input_ids, attention_mask, token_type_ids)` (as
  /// `TextEncoderModel::forward`), in eval mode (no dropout).
  TaskModelOutput forward(const torch::Tensor& input_ids,
                          const torch::Tensor& attention_mask = {},
                          const torch::Tensor& token_type_ids = {});

  /// Registers the submodules.
  void reset() override;
  /// Prints `mha::TextTaskModel(model_type=bert, task=ForSequenceClassification, num_labels=2)`.
  void pretty_print(std::ostream& stream) const override;

  /// The options this module was constructed with.
  TextTaskModelOptions options;
  /// The base model.
  TextEncoderModel model{nullptr};
  /// The sequence classification head's hidden layer (not BERT's), or empty.
  torch::nn::Linear dense{nullptr};
  /// The head's output layer (E -> num_labels).
  torch::nn::Linear classifier{nullptr};
};

/// A `ModuleHolder` for `TextTaskModelImpl`.
TORCH_MODULE(TextTaskModel);

/// Options of `mha::ImageClassifier`.
struct ImageClassifierOptions {
  /// The base model's options and the number of labels.
  ImageClassifierOptions(VisionEncoderModelOptions encoder, int64_t num_labels)
      : encoder_(std::move(encoder)), num_labels_(num_labels) {}
  /// The base model's options.
  TORCH_ARG(VisionEncoderModelOptions, encoder);
  /// The head's outputs.
  TORCH_ARG(int64_t, num_labels);
  /// DeiT's `DeiTForImageClassificationWithTeacher`: a second classifier on
  /// the distillation token, the logits the mean of both.
  TORCH_ARG(bool, with_teacher) = false;
  /// Each label's name by id (config.json's `id2label`).
  TORCH_ARG(std::vector<std::string>, id2label);
  /// config.json's `problem_type`, or "".
  TORCH_ARG(std::string, problem_type);
};

/// A vision encoder with a classifier on the first token of its last layer's
/// (normed) output: transformers' `ViTForImageClassification`,
/// `DeiTForImageClassification`, `DeiTForImageClassificationWithTeacher`.
class ImageClassifierImpl : public detail::WholeModel<ImageClassifierImpl> {
 public:
  /// Builds the submodules (random weights; `load_hf_model` loads a checkpoint's).
  explicit ImageClassifierImpl(ImageClassifierOptions options_) : options(std::move(options_)) {
    reset();
  }

  /// transformers' `model(pixel_values)`: (N, C, H, W) -> logits (N, num_labels).
  TaskModelOutput forward(const torch::Tensor& pixel_values);

  /// Registers the submodules.
  void reset() override;
  /// Prints `mha::ImageClassifier(model_type=vit, num_labels=10)`.
  void pretty_print(std::ostream& stream) const override;

  /// The options this module was constructed with.
  ImageClassifierOptions options;
  /// The base model.
  VisionEncoderModel model{nullptr};
  /// On the first (CLS) token: E -> num_labels.
  torch::nn::Linear classifier{nullptr};
  /// With a teacher: on the distillation token, E -> num_labels; else empty.
  torch::nn::Linear distillation_classifier{nullptr};
};

/// A `ModuleHolder` for `ImageClassifierImpl`.
TORCH_MODULE(ImageClassifier);

}  // namespace mha
