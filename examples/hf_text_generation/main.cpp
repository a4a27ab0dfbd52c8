// Continues a prompt with a decoder-only Hugging Face model directory (gpt2,
// opt), from text to text: the directory's tokenizer turns the prompt into
// ids, mha::generate continues them greedily, the tokenizer turns the result
// back into text. Prints the text; given EXPECTED_FILE (the text transformers'
// generate + batch_decode gives on the same directory), exits 1 unless equal.
// Usage: mha_hf_text_generation MODEL_DIR PROMPT [NEW_TOKENS [EXPECTED_FILE]]

#include <mha/generation.h>
#include <mha/hf_models.h>
#include <mha/tokenizer.h>
#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR PROMPT [NEW_TOKENS [EXPECTED_FILE]]\n";
    return 2;
  }
  torch::NoGradGuard no_grad;
  const int64_t new_tokens = argc >= 4 ? std::stoll(argv[3]) : 12;

  // The model code: the directory's tokenizer and model, text to text.
  const mha::Tokenizer tokenizer = mha::load_hf_tokenizer(argv[1]);
  mha::CausalLM model = mha::load_hf_model(argv[1]).as<mha::CausalLM>();
  const std::vector<int64_t> ids = tokenizer.encode(argv[2]);
  const torch::Tensor prompt = torch::tensor(ids, torch::kLong).unsqueeze(0);  // (1, L)
  const torch::Tensor tokens =
      mha::generate(model, prompt, {}, mha::GenerationConfig().max_new_tokens(new_tokens));
  const std::string text = tokenizer.batch_decode(tokens, /*skip_special_tokens=*/true)[0];
  std::cout << text << "\n";

  if (argc < 5) return 0;
  std::ifstream expected_file(argv[4]);
  std::stringstream expected;
  expected << expected_file.rdbuf();
  const bool same = expected_file.good() && text == expected.str();
  std::cout << "transformers' text: " << (same ? "same" : "differs: " + expected.str()) << "\n";
  return same ? 0 : 1;
}
