// mha::ImageClassifier: transformers 5.23's ViTForImageClassification,
// DeiTForImageClassification and DeiTForImageClassificationWithTeacher
// (models/{vit,deit}/modeling_*.py) in eval mode.

#include <c10/util/Exception.h>
#include <mha/hf_task_models.h>
#include <mha/quantization.h>
#include <torch/types.h>

#include "hugging_face/models/model_inputs.h"
#include "linear/converted_module.h"

namespace mha {

using torch::Tensor;

void ImageClassifierImpl::reset() {
  TORCH_CHECK_VALUE(!options.with_teacher() || options.encoder().model_type() == "deit",
                    "ImageClassifier: a teacher's classifier reads DeiT's distillation token; "
                    "model_type is '",
                    options.encoder().model_type(), "'");
  const int64_t width = options.encoder().layer().d_model();
  model = register_module("model", VisionEncoderModel(options.encoder()));
  classifier = register_module("classifier", torch::nn::Linear(width, options.num_labels()));
  if (options.with_teacher()) {
    distillation_classifier =
        register_module("distillation_classifier", torch::nn::Linear(width, options.num_labels()));
  }
}

TaskModelOutput ImageClassifierImpl::forward(const Tensor& pixel_values) {
  const Tensor hidden = model(pixel_values).last_hidden_state;   // (N, T, E)
  Tensor logits = mha::linear(classifier, hidden.select(1, 0));  // (N, labels)
  if (!distillation_classifier.is_empty()) {                     // the mean of both
    logits = (logits + mha::linear(distillation_classifier, hidden.select(1, 1))) / 2;
  }
  return {logits, Tensor(), Tensor()};
}

template class detail::ConvertibleModule<ImageClassifierImpl>;
template class detail::WholeModel<ImageClassifierImpl>;

void ImageClassifierImpl::pretty_print(std::ostream& stream) const {
  stream << "mha::ImageClassifier(model_type=" << options.encoder().model_type()
         << ", num_labels=" << options.num_labels() << ")";
}

}  // namespace mha
