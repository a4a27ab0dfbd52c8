// mha::TextClassificationPipeline: transformers 5.23's
// pipelines/text_classification.py (postprocess: function_to_apply, top_k).

#include <c10/util/Exception.h>
#include <mha/pipelines.h>

#include <algorithm>

#include "pipelines/batches.h"

namespace mha {

namespace {

/// The score function the config implies (postprocess's default).
ScoreFunction default_function(const TextTaskModelOptions& options) {
  const std::string& problem = options.problem_type();
  if (problem == "regression") return ScoreFunction::kNone;
  if (problem == "multi_label_classification" || options.num_labels() == 1) {
    return ScoreFunction::kSigmoid;
  }
  return ScoreFunction::kSoftmax;
}

/// One text's labels from its logits (labels), best first, `top_k` of them.
std::vector<LabelScore> labels_of(const torch::Tensor& logits,
                                  const std::vector<std::string>& id2label,
                                  ScoreFunction function,
                                  std::optional<int64_t> top_k) {
  torch::Tensor scores = logits.to(torch::kFloat32);  // (labels)
  if (function == ScoreFunction::kSigmoid) {
    scores = 1.0 / (1.0 + (-scores).exp());
  } else if (function == ScoreFunction::kSoftmax) {
    scores = detail::pipeline_softmax(scores);
  }
  std::vector<LabelScore> out;
  for (int64_t i = 0; i < scores.size(0); ++i) {
    out.push_back({id2label.at(static_cast<size_t>(i)), scores[i].item<double>()});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const LabelScore& a, const LabelScore& b) { return a.score > b.score; });
  if (top_k && *top_k < static_cast<int64_t>(out.size())) out.resize(static_cast<size_t>(*top_k));
  return out;
}

}  // namespace

std::vector<std::vector<LabelScore>> TextClassificationPipeline::operator()(
    const std::vector<std::string>& texts, const TextClassificationOptions& options) const {
  return classify(detail::encode_for_model(tokenizer_, texts, options.truncation()), options);
}

std::vector<std::vector<LabelScore>> TextClassificationPipeline::operator()(
    const std::vector<std::string>& texts,
    const std::vector<std::string>& text_pairs,
    const TextClassificationOptions& options) const {
  detail::check_one_each("TextClassificationPipeline", "text", texts.size(), "text_pair",
                         text_pairs.size());
  return classify(detail::encode_for_model(tokenizer_, texts, options.truncation(), &text_pairs),
                  options);
}

std::vector<std::vector<LabelScore>> TextClassificationPipeline::classify(
    const std::vector<EncodedText>& rows, const TextClassificationOptions& options) const {
  TORCH_CHECK_VALUE(
      !options.top_k() || *options.top_k() > 0,
      "TextClassificationPipeline: top_k: expected a positive number or none, but got ",
      options.top_k().value_or(0));
  const ScoreFunction function = options.function_to_apply() == ScoreFunction::kDefault
                                     ? default_function(model_->options)
                                     : options.function_to_apply();
  std::vector<std::vector<LabelScore>> out(rows.size());
  detail::for_each_batch(rows.size(), options.batch_size(), [&](size_t begin, size_t end) {
    const torch::Tensor logits =
        detail::run_padded(model_, rows, begin, end, tokenizer_.pad_token_id().value_or(0))
            .logits;  // (B, labels)
    for (size_t i = begin; i < end; ++i) {
      out[i] = labels_of(logits[static_cast<int64_t>(i - begin)], model_->options.id2label(),
                         function, options.top_k());
    }
  });
  return out;
}

}  // namespace mha
