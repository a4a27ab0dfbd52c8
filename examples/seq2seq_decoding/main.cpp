// Greedy seq2seq decoding with mha::Transformer and a per-layer decoder cache:
// a small nn.Transformer trained in Python on reversing digit sequences
// (scripts/export_seq2seq_reference.py writes its weights, the sources and
// Python's greedy tokens), decoded here one token per step, each step running
// the decoder on the newest position only. Prints both token sequences;
// exits 1 when they differ. With --int8, every linear is int8
// (mha::quantize_dynamic) and the tokens are not expected to be Python's
// float32 ones: it prints the share that are, and the logits' difference.
// Usage: mha_seq2seq_decoding FILE.pt [--int8]
// On a machine shared with other work, run it with OMP_WAIT_POLICY=PASSIVE
// (docs/semantics.md, "Prepacked weights and threads"): the torch wheel's OpenMP threads spin
// otherwise.

#include <mha/quantization.h>
#include <mha/state_dict.h>
#include <torch/torch.h>

#include <iostream>
#include <string>

#include "seq2seq_model.h"

int main(int argc, char** argv) {
  const bool int8 = argc == 3 && std::string(argv[2]) == "--int8";
  if (argc != 2 && !int8) {
    std::cerr << "usage: " << argv[0]
              << " REFERENCE.pt [--int8] (scripts/export_seq2seq_reference.py)\n";
    return 2;
  }
  const auto file = mha::read_state_dict(argv[1]);
  seq2seq::Model model = seq2seq::load_model(file);
  if (int8) mha::quantize_dynamic(model);
  const torch::Tensor& python_tokens = file.at("tokens");  // (N, 1 + steps)
  const auto padding = file.find("src_key_padding_mask");
  const torch::Tensor src_key_padding_mask =
      padding == file.end() ? torch::Tensor() : padding->second;
  const auto [tokens, logits] = seq2seq::greedy_decode(model, file.at("src"), src_key_padding_mask,
                                                       python_tokens.size(1) - 1);
  const double max_diff = (logits - file.at("logits")).abs().max().item<double>();
  std::cout << "source (N, S):\n"
            << file.at("src") << "\nmha, decoder cache (BOS first):\n"
            << tokens << "\nPython's greedy loop (whole prefix each step):\n"
            << python_tokens << "\nmax |logits difference| " << max_diff << "\n";
  if (int8) {
    const int64_t steps = tokens.size(1) - 1;  // BOS first
    const double same = (tokens.narrow(1, 1, steps) == python_tokens.narrow(1, 1, steps))
                            .to(torch::kDouble)
                            .mean()
                            .item<double>();
    std::cout << "int8: " << 100.0 * same << "% of the tokens equal Python's float32 ones\n";
    return 0;
  }
  if (!torch::equal(tokens, python_tokens)) {
    std::cerr << "the tokens differ from Python's\n";
    return 1;
  }
  std::cout << "same tokens as Python\n";
  return 0;
}
