// mha::VisionEncoderModel: ViT and DeiT embeddings (transformers 5.23,
// models/{vit,deit}/modeling_*.py), the pre-norm layers, the pooler.

#include <c10/util/Exception.h>
#include <mha/hf_encoder_models.h>
#include <mha/quantization.h>
#include <torch/types.h>

#include "hugging_face/models/model_inputs.h"
#include "linear/converted_module.h"

namespace mha {

using torch::Tensor;

VisionEncoderModelOptions::VisionEncoderModelOptions(std::string model_type,
                                                     TransformerEncoderLayerOptions layer,
                                                     int64_t num_layers)
    : model_type_(std::move(model_type)), layer_(std::move(layer)), num_layers_(num_layers) {}

void VisionEncoderModelImpl::reset() {
  const int64_t width = options.layer().d_model();
  const int64_t side = options.image_size() / options.patch_size();
  const int64_t tokens = side * side + (options.model_type() == "deit" ? 2 : 1);
  patch_embeddings = register_module(
      "patch_embeddings", torch::nn::Conv2d(torch::nn::Conv2dOptions(options.num_channels(), width,
                                                                     options.patch_size())
                                                .stride(options.patch_size())));
  cls_token = register_parameter("cls_token", torch::zeros({1, 1, width}));
  if (options.model_type() == "deit") {
    distillation_token = register_parameter("distillation_token", torch::zeros({1, 1, width}));
  }
  position_embeddings = register_parameter("position_embeddings", torch::zeros({1, tokens, width}));
  auto layer = options.layer();
  layer.batch_first(true);
  encoder = register_module(
      "encoder", TransformerEncoder(
                     TransformerEncoderOptions(TransformerEncoderLayer(layer), options.num_layers())
                         .norm(torch::nn::AnyModule(LayerNorm(
                             LayerNormOptions({width}).eps(options.layer().layer_norm_eps()))))
                         .enable_nested_tensor(false)));
  if (options.pooler_size() > 0) {
    pooler = register_module("pooler", torch::nn::Linear(width, options.pooler_size()));
  }
}

Tensor VisionEncoderModelImpl::embed(const Tensor& pixel_values) {
  const int64_t size = options.image_size();
  TORCH_CHECK_VALUE(pixel_values.dim() == 4 && pixel_values.size(1) == options.num_channels() &&
                        pixel_values.size(2) == size && pixel_values.size(3) == size,
                    "pixel_values: expected shape (N, ", options.num_channels(), ", ", size, ", ",
                    size, ") (config.json: num_channels, image_size), but got ",
                    pixel_values.sizes());
  const int64_t batch = pixel_values.size(0);
  // (N, E, side, side) -> (N, patches, E)
  const Tensor patches = patch_embeddings(pixel_values).flatten(2).transpose(1, 2);
  std::vector<Tensor> parts{cls_token.expand({batch, -1, -1})};
  if (distillation_token.defined()) {
    parts.push_back(distillation_token.expand({batch, -1, -1}));
  }
  parts.push_back(patches);
  return torch::cat(parts, /*dim=*/1) + position_embeddings;  // (N, T, E)
}

EncoderModelOutput VisionEncoderModelImpl::forward(const Tensor& pixel_values) {
  return detail::encoder_model_output(encoder(embed(pixel_values)), pooler);  // (N, T, E)
}

template class detail::ConvertibleModule<VisionEncoderModelImpl>;
template class detail::WholeModel<VisionEncoderModelImpl>;

void VisionEncoderModelImpl::pretty_print(std::ostream& stream) const {
  detail::print_model(stream, "mha::VisionEncoderModel", options.model_type(),
                      options.num_layers());
}

}  // namespace mha
