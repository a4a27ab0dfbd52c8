// A BERT-style encoder from a Hugging Face model directory (bert, roberta,
// distilbert), read as published: mha::load_hf_encoder gives the layers as a
// mha::TransformerEncoder and hands back the embedding tables, which this
// example turns into the layers' input in LibTorch, as transformers'
// BertEmbeddings, RobertaEmbeddings and DistilBERT's Embeddings do
// (models/{bert,roberta,distilbert}/modeling_*.py). Prints last_hidden_state's
// shape; given transformers' outputs (scripts/export_hf_reference.py writes
// mha_reference.pt), also the largest difference, and exits 1 above 1e-5.
// Usage: mha_hf_encoder MODEL_DIR [REFERENCE.pt]

#include <mha/hugging_face.h>
#include <mha/state_dict.h>
#include <torch/torch.h>

#include <iostream>
#include <string>

namespace {

// transformers' outputs to within 1e-5 in float32, eval mode.
constexpr double kTolerance = 1e-5;

/// The embeddings' output (transformers' hidden_states[0]): word + position
/// (+ token type 0) embeddings, then the embedding LayerNorm.
torch::Tensor embed(const mha::HfEncoder& model,
                    const mha::HfConfig& config,
                    const torch::Tensor& input_ids) {  // (N, L)
  const auto& t = model.tensors;
  const int64_t length = input_ids.size(1);
  torch::Tensor positions = torch::arange(length).unsqueeze(0);  // (1, L)
  if (model.model_type == "roberta") {
    // create_position_ids_from_input_ids: count non-pad tokens from pad + 1.
    const int64_t pad = config.integer("pad_token_id");
    const auto not_pad = input_ids.ne(pad).to(torch::kLong);
    positions = torch::cumsum(not_pad, /*dim=*/1) * not_pad + pad;
  }
  auto x = torch::embedding(t.at("embeddings.word_embeddings.weight"), input_ids);  // (N, L, E)
  if (t.count("embeddings.token_type_embeddings.weight")) {
    x = x + t.at("embeddings.token_type_embeddings.weight")[0];
  }
  x = x + torch::embedding(t.at("embeddings.position_embeddings.weight"), positions);
  const double eps = model.model_type == "distilbert" ? 1e-12 : config.number("layer_norm_eps");
  return torch::layer_norm(x, {x.size(-1)}, t.at("embeddings.LayerNorm.weight"),
                           t.at("embeddings.LayerNorm.bias"), eps);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR [REFERENCE.pt]\n";
    return 2;
  }
  torch::NoGradGuard no_grad;
  const mha::HfCheckpoint checkpoint = mha::read_hf_checkpoint(argv[1]);
  mha::HfEncoder model = mha::load_hf_encoder(checkpoint);

  // Token ids and transformers' attention mask (1 = a token, 0 = padding).
  std::map<std::string, torch::Tensor> reference;
  torch::Tensor input_ids = torch::tensor({{5, 17, 23, 42, 8}, {5, 9, 11, 0, 0}});
  torch::Tensor attention_mask = torch::tensor({{1, 1, 1, 1, 1}, {1, 1, 1, 0, 0}});
  if (argc == 3) {
    reference = mha::read_state_dict(argv[2]);
    input_ids = reference.at("input_ids");
    attention_mask = reference.at("attention_mask");
  }

  const torch::Tensor x = embed(model, checkpoint.config, input_ids);  // (N, L, E)
  const torch::Tensor last_hidden_state =
      model.encoder->forward(x, torch::Tensor(), attention_mask.eq(0));  // (N, L, E)
  std::cout << checkpoint.model_type << ": " << model.encoder->options.num_layers()
            << " layers, last_hidden_state " << last_hidden_state.sizes() << "\n";
  if (reference.empty()) {
    return 0;
  }
  const double diff =
      (last_hidden_state - reference.at("last_hidden_state")).abs().max().item<double>();
  std::cout << "max abs diff to transformers' last_hidden_state: " << diff << " ("
            << (diff <= kTolerance ? "within" : "above") << " " << kTolerance << ")\n";
  return diff <= kTolerance ? 0 : 1;
}
