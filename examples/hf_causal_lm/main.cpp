// Greedy continuation of a prompt with a decoder-only Hugging Face model
// directory (gpt2, opt) as one module: mha::load_hf_model returns a
// mha::CausalLM (embeddings, causal layers, tied LM head), and mha::generate
// continues the prompt greedily through its cache (plain greedy here: a
// GenerationConfig with only max_new_tokens; mha::read_generation_config(dir)
// gives the checkpoint's own rules). Prints the tokens; checks that they are
// the tokens the whole-sequence forward ranks first (exit 1 otherwise).
// Usage: mha_hf_causal_lm MODEL_DIR [NEW_TOKENS]

#include <mha/generation.h>
#include <mha/hf_models.h>
#include <torch/torch.h>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR [NEW_TOKENS]\n";
    return 2;
  }
  torch::NoGradGuard no_grad;
  const int64_t new_tokens = argc == 3 ? std::stoll(argv[2]) : 8;

  // The model code: load, generate, print.
  mha::CausalLM model = mha::load_hf_model(argv[1]).as<mha::CausalLM>();
  const torch::Tensor prompt_ids = torch::tensor({{5, 17, 23, 42}});  // (1, L): the prompt
  const torch::Tensor tokens =
      mha::generate(model, prompt_ids, {}, mha::GenerationConfig().max_new_tokens(new_tokens));
  std::cout << model->options.model_type() << " greedy tokens (prompt first): " << tokens << "\n";

  // The whole sequence at once ranks the same tokens first.
  const torch::Tensor whole = model(tokens).argmax(-1);  // (1, L + new_tokens)
  const int64_t prompt = tokens.size(1) - new_tokens;
  const bool same =
      torch::equal(whole.narrow(1, prompt - 1, new_tokens), tokens.narrow(1, prompt, new_tokens));
  std::cout << "cached steps equal the whole forward's argmax: " << (same ? "yes" : "no") << "\n";
  return same ? 0 : 1;
}
