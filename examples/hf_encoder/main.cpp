// A Hugging Face encoder directory (bert, roberta, distilbert, electra, vit,
// deit) as one LibTorch module: mha::load_hf_model reads it and returns a
// mha::TextEncoderModel (token ids in) or a mha::VisionEncoderModel (pixels
// in), embeddings and pooler included. Prints last_hidden_state's shape;
// given transformers' outputs (scripts/export_hf_reference.py writes
// mha_reference.pt), also the largest difference at the real positions, and
// exits 1 above 1e-5.
// Usage: mha_hf_encoder MODEL_DIR [REFERENCE.pt]

#include <mha/hf_models.h>
#include <mha/state_dict.h>
#include <torch/torch.h>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR [REFERENCE.pt]\n";
    return 2;
  }
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> ref;  // transformers' inputs and outputs, if given
  if (argc == 3) ref = mha::read_state_dict(argv[2]);
  auto input = [&](const std::string& name, torch::Tensor fallback) {
    return ref.count(name) ? ref.at(name) : fallback;
  };

  // The model code: load, call, print.
  const mha::HfModel model = mha::load_hf_model(argv[1]);
  mha::EncoderModelOutput out;
  torch::Tensor mask;  // 1 = token, 0 = padding
  if (mha::hf_model_class(model.model_type) == "VisionEncoderModel") {
    out =
        model.as<mha::VisionEncoderModel>()(input("pixel_values", torch::randn({2, 3, 224, 224})));
  } else {
    mask = input("attention_mask", torch::tensor({{1, 1, 1, 1, 1}, {1, 1, 1, 0, 0}}));
    out = model.as<mha::TextEncoderModel>()(
        input("input_ids", torch::tensor({{5, 17, 23, 42, 8}, {5, 9, 11, 0, 0}})), mask,
        input("token_type_ids", torch::Tensor()));
  }
  std::cout << model.model_type << ": last_hidden_state " << out.last_hidden_state.sizes() << "\n";

  if (ref.empty()) return 0;
  torch::Tensor diff = (out.last_hidden_state - ref.at("last_hidden_state")).abs();  // (N, L, E)
  if (mask.defined()) diff = diff.index({mask.ne(0)});  // real positions
  const double max_diff = diff.max().item<double>();
  std::cout << "max abs diff to transformers' last_hidden_state: " << max_diff << "\n";
  return max_diff <= 1e-5 ? 0 : 1;
}
