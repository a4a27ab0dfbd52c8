// embedding_rounds: mha's side of scripts/bench_embeddings.py, which times
// sentence embeddings end to end from text against sentence-transformers and
// ONNX Runtime on the same directory and sentences.
// Usage: embedding_rounds DIR SENTENCES THREADS ROUNDS [VECTORS [LAYOUT]]
// SENTENCES: a JSON list of strings. On THREADS intra-op threads
// (at::set_num_threads), times ROUNDS calls of
// mha::SentenceTransformer(DIR).encode(sentences, 32) (tokenization
// included) after one warm-up call; prints one JSON object with each round's
// seconds; writes the vectors (N, D) float32 to VECTORS when given. LAYOUT:
// the encoder's prepacked weights in "panels" or "onednn" (default: load_hf_model's).

#include <ATen/Parallel.h>
#include <mha/sentence_transformer.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 5 || argc > 7) {
    std::cerr << "usage: " << argv[0] << " DIR SENTENCES THREADS ROUNDS [VECTORS [LAYOUT]]\n";
    return 2;
  }
  at::set_num_threads(std::atoi(argv[3]));
  const int rounds = std::atoi(argv[4]);
  std::ifstream in(argv[2]);
  const auto sentences = nlohmann::json::parse(in).get<std::vector<std::string>>();
  mha::HfModelLoadOptions options;
  if (argc == 7) options.encoder_panels(std::string(argv[6]) == "panels");
  const mha::SentenceTransformer model(argv[1], options);
  torch::Tensor vectors = model.encode(sentences, 32);  // (N, D), the warm-up
  nlohmann::json seconds = nlohmann::json::array();
  for (int round = 0; round < rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    vectors = model.encode(sentences, 32);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (argc >= 6) {
    const torch::Tensor out = vectors.contiguous();
    std::ofstream file(argv[5], std::ios::binary);
    file.write(reinterpret_cast<const char*>(out.data_ptr<float>()),
               static_cast<std::streamsize>(out.numel() * sizeof(float)));
  }
  std::cout << nlohmann::json{{"sentences", sentences.size()}, {"seconds", seconds}}.dump() << "\n";
  return 0;
}
