// Greedy decoding of a Marian/BART-style Hugging Face model directory (marian,
// bart, mbart) as one module: mha::load_hf_model returns a mha::Seq2SeqLM
// (embeddings, stacks, tied LM head, final_logits_bias), and mha::generate
// decodes with the rules transformers' generate takes from
// generation_config.json (else config.json), read by
// mha::read_generation_config: the decoder start, the end tokens, the forced
// end token, min_new_tokens, max_new_tokens (or max_length), bad_words_ids,
// the padding after the end.
// Prints the tokens; given transformers' (scripts/export_hf_reference.py
// writes mha_reference.pt), exits 1 unless they are the same.
// Usage: mha_hf_seq2seq MODEL_DIR [REFERENCE.pt]

#include <mha/generation.h>
#include <mha/hf_models.h>
#include <mha/state_dict.h>
#include <torch/torch.h>

#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR [REFERENCE.pt]\n";
    return 2;
  }
  mha::Seq2SeqLM model = mha::load_hf_model(argv[1]).as<mha::Seq2SeqLM>();
  const mha::GenerationConfig config = mha::read_generation_config(argv[1]);
  const int64_t pad = config.pad_token_id().value_or(0);

  std::map<std::string, torch::Tensor> reference;
  torch::Tensor input_ids =
      torch::tensor(std::vector<int64_t>{14, 14, 15, 31, 22, 28, 14, 50, 26, pad, pad, pad})
          .view({2, 6});  // (N, S)
  torch::Tensor attention_mask = input_ids.ne(pad).to(torch::kLong);
  if (argc == 3) {
    reference = mha::read_state_dict(argv[2]);
    input_ids = reference.at("input_ids");
    attention_mask = reference.at("attention_mask");
  }

  const torch::Tensor tokens = mha::generate(model, input_ids, attention_mask, config);  // (N, T)
  std::cout << model->options.model_type() << " greedy tokens (decoder start first):\n"
            << tokens << "\n";
  if (reference.empty()) {
    return 0;
  }
  // transformers' tokens, with the padding after the end written as -1.
  const auto expected = reference.at("generated");
  auto ours = tokens.masked_fill(tokens.eq(pad), -1);
  ours.select(1, 0).fill_(tokens[0][0].item<int64_t>());  // the decoder start
  const bool same = ours.sizes() == expected.sizes() && torch::equal(ours, expected);
  std::cout << "tokens equal to transformers' generate: " << (same ? "yes" : "no") << "\n";
  if (!same) std::cout << "transformers' tokens:\n" << expected << "\n";
  return same ? 0 : 1;
}
