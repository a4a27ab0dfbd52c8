// Embeds sentences with a text encoder's Hugging Face directory (bert,
// roberta, distilbert, electra), from text: the directory's tokenizer pads
// the sentences into one batch, the encoder runs once, and each sentence's
// embedding is the mean of its tokens' last hidden states (padding left
// out). Prints each pair's cosine similarity; given EXPECTED.safetensors
// (transformers' embeddings of the same sentences, `embeddings` (N, E)),
// exits 1 unless within 1e-5.
// Usage: mha_hf_sentence_embedding MODEL_DIR [EXPECTED.safetensors]

#include <mha/hf_models.h>
#include <mha/state_dict.h>
#include <mha/tokenizer.h>
#include <torch/torch.h>

#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR [EXPECTED.safetensors]\n";
    return 2;
  }
  torch::NoGradGuard no_grad;
  const std::vector<std::string> sentences = {
      "The early bird catches the worm.", "Der frühe Vogel fängt den Wurm.",
      "Кто рано встаёт, тому бог подаёт.", "A rolling stone gathers no moss."};

  // The model code: tokenize, encode, pool.
  const mha::Tokenizer tokenizer = mha::load_hf_tokenizer(argv[1]);
  mha::TextEncoderModel model = mha::load_hf_model(argv[1]).as<mha::TextEncoderModel>();
  const mha::TokenizedBatch batch = tokenizer.encode_batch(sentences);
  const torch::Tensor hidden = model(batch.input_ids, batch.attention_mask).last_hidden_state;
  const torch::Tensor mask = batch.attention_mask.unsqueeze(-1).to(hidden.dtype());  // (N, L, 1)
  const torch::Tensor embeddings = (hidden * mask).sum(1) / mask.sum(1);             // (N, E)

  const torch::Tensor unit = torch::nn::functional::normalize(embeddings);
  const torch::Tensor cosine = unit.matmul(unit.t());  // (N, N)
  for (size_t i = 1; i < sentences.size(); ++i) {
    std::cout << "cos(0, " << i << ") = " << cosine[0][static_cast<int64_t>(i)].item<double>()
              << "  " << sentences[i] << "\n";
  }
  if (argc == 2) return 0;
  const torch::Tensor expected = mha::read_state_dict(argv[2]).at("embeddings");
  const double max_diff = (embeddings - expected).abs().max().item<double>();
  std::cout << "max abs diff to transformers' embeddings: " << max_diff << "\n";
  return max_diff <= 1e-5 ? 0 : 1;
}
