// mha::TextTaskModel: a text encoder's task heads as transformers 5.23 runs
// them in eval mode (models/{bert,roberta,distilbert,electra}/modeling_*.py:
// BertForSequenceClassification, RobertaClassificationHead,
// ElectraClassificationHead, DistilBertForSequenceClassification, and each
// family's ...ForTokenClassification and ...ForQuestionAnswering).

#include <c10/util/Exception.h>
#include <mha/hf_task_models.h>
#include <mha/quantization.h>
#include <torch/types.h>

#include "hugging_face/models/model_inputs.h"
#include "linear/converted_module.h"

namespace mha {

using torch::Tensor;

void TextTaskModelImpl::reset() {
  const HfTask task = options.task();
  const std::string& type = options.encoder().model_type();
  TORCH_CHECK_VALUE(task != HfTask::kImageClassification,
                    "TextTaskModel: image classification is mha::ImageClassifier's task");
  TORCH_CHECK_VALUE(task != HfTask::kQuestionAnswering || options.num_labels() == 2,
                    "TextTaskModel: question answering needs num_labels 2 (start, end), but got ",
                    options.num_labels());
  TORCH_CHECK_VALUE(
      task != HfTask::kSequenceClassification || type != "bert" || options.encoder().pooler(),
      "TextTaskModel: BERT's sequence classification reads the pooler's output: "
      "expected encoder options with pooler(true)");
  const int64_t width = options.encoder().layer().d_model();
  model = register_module("model", TextEncoderModel(options.encoder()));
  if (task == HfTask::kSequenceClassification && type != "bert") {
    dense = register_module("dense", torch::nn::Linear(width, width));
  }
  classifier = register_module("classifier", torch::nn::Linear(width, options.num_labels()));
}

namespace {

/// A sequence's class scores from the base model's output: each family's head.
Tensor sequence_logits(const TextTaskModelImpl& m, const EncoderModelOutput& base) {
  const std::string& type = m.options.encoder().model_type();
  if (type == "bert") {
    return mha::linear(m.classifier, base.pooler_output);  // (N, labels)
  }
  const Tensor first = base.last_hidden_state.select(1, 0);  // (N, E)
  Tensor hidden = mha::linear(m.dense, first);               // (N, E)
  if (type == "distilbert") {
    hidden = torch::relu(hidden);
  } else if (type == "electra") {
    hidden = torch::gelu(hidden);
  } else {  // roberta
    hidden = torch::tanh(hidden);
  }
  return mha::linear(m.classifier, hidden);  // (N, labels)
}

}  // namespace

TaskModelOutput TextTaskModelImpl::forward(const Tensor& input_ids,
                                           const Tensor& attention_mask,
                                           const Tensor& token_type_ids) {
  const EncoderModelOutput base = model(input_ids, attention_mask, token_type_ids);
  TaskModelOutput out;
  switch (options.task()) {
    case HfTask::kSequenceClassification:
      out.logits = sequence_logits(*this, base);
      break;
    case HfTask::kTokenClassification:
      out.logits = mha::linear(classifier, base.last_hidden_state);  // (N, L, labels)
      break;
    case HfTask::kQuestionAnswering: {
      const Tensor both = mha::linear(classifier, base.last_hidden_state);  // (N, L, 2)
      out.start_logits = both.select(2, 0).contiguous();                    // (N, L)
      out.end_logits = both.select(2, 1).contiguous();                      // (N, L)
      break;
    }
    case HfTask::kImageClassification:
      break;  // refused by reset()
  }
  return out;
}

template class detail::ConvertibleModule<TextTaskModelImpl>;
template class detail::WholeModel<TextTaskModelImpl>;

void TextTaskModelImpl::pretty_print(std::ostream& stream) const {
  stream << "mha::TextTaskModel(model_type=" << options.encoder().model_type()
         << ", task=" << hf_task_name(options.task()) << ", num_labels=" << options.num_labels()
         << ")";
}

}  // namespace mha
