// Many requests at once with a Hugging Face language model directory (gpt2,
// opt, bart, mbart, marian): mha::GenerationServer admits requests that join
// a running batch, streams each token as it is chosen, and hands over each
// finished sequence. Each request decodes with the checkpoint's generation
// config (mha::read_generation_config), greedily; the program checks that
// every sequence is what mha::generate gives for that request alone (exit 1
// otherwise).
// Usage: mha_hf_serving MODEL_DIR

#include <mha/generation.h>
#include <mha/generation_server.h>
#include <mha/hf_models.h>
#include <torch/torch.h>

#include <iostream>
#include <variant>
#include <vector>

namespace {

/// Serves `prompts` (each (L) token ids) with `model`, the second half
/// joining after the first step, and checks each against `mha::generate`
/// alone. Returns whether all matched.
template <typename LanguageModel>
bool serve(LanguageModel model,
           const mha::GenerationConfig& config,
           const std::vector<torch::Tensor>& prompts) {
  mha::GenerationServer server(model, mha::ContinuousBatchOptions().num_blocks(64));
  std::vector<int64_t> ids;
  auto submit = [&](const torch::Tensor& prompt) {
    mha::GenerationRequest request;
    request.input_ids = prompt;
    request.config = config;
    request.on_token = [](int64_t id, int64_t token) {
      std::cout << "request " << id << ": token " << token << "\n";  // streamed
    };
    ids.push_back(server.submit(request));
  };
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (i == prompts.size() / 2) server.step();  // the rest join a running batch
    submit(prompts[i]);
  }
  server.run();
  bool same = true;
  for (size_t i = 0; i < ids.size(); ++i) {
    const torch::Tensor served = server.take(ids[i]);  // (1, T)
    const torch::Tensor alone = mha::generate(model, prompts[i].unsqueeze(0), {}, config);
    std::cout << "request " << ids[i] << ": " << served << "\n";
    same = same && torch::equal(served, alone);
  }
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR\n";
    return 2;
  }
  const mha::HfModel model = mha::load_hf_model(argv[1]);
  const mha::GenerationConfig config = mha::read_generation_config(argv[1]).num_beams(1);
  const std::vector<torch::Tensor> prompts = {torch::tensor({5, 17, 23, 42}), torch::tensor({8, 9}),
                                              torch::tensor({30, 31, 32}), torch::tensor({12})};
  const bool same = std::holds_alternative<mha::CausalLM>(model.module)
                        ? serve(model.as<mha::CausalLM>(), config, prompts)
                        : serve(model.as<mha::Seq2SeqLM>(), config, prompts);
  std::cout << "each served request equals generate alone: " << (same ? "yes" : "no") << "\n";
  return same ? 0 : 1;
}
