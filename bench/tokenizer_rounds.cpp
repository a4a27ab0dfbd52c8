// tokenizer_rounds: mha's side of scripts/bench_tokenizers.py, which times
// mha::Tokenizer against the `tokenizers` package (its Rust batch calls,
// called from Python) on the same directory and lines.
// Usage: tokenizer_rounds DIR THREADS ROUNDS
// Reads DIR/mha_reference.json's corpus lines (scripts/export_tokenizer_reference.py;
// the edge cases at its end left out), and on THREADS intra-op threads
// (at::set_num_threads) times, ROUNDS times each: Tokenizer::encode_each of
// every line (the ids with special tokens, unpadded) and Tokenizer::batch_decode
// of their ids. Prints one JSON object: the lines, the ids in all, and each
// round's lines per second of both.

#include <ATen/Parallel.h>
#include <mha/tokenizer.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

/// Lines per second of `run` over `lines` lines.
template <typename Run>
double lines_per_second(size_t lines, Run run) {
  const auto start = Clock::now();
  run();
  return static_cast<double>(lines) / std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: " << argv[0] << " DIR THREADS ROUNDS\n";
    return 2;
  }
  const std::string dir = argv[1];
  at::set_num_threads(std::atoi(argv[2]));
  const int rounds = std::atoi(argv[3]);
  std::ifstream in(dir + "/mha_reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  std::vector<std::string> lines = ref.at("lines").get<std::vector<std::string>>();
  lines.resize(lines.size() >= 10000 ? 10000 : lines.size());  // the corpus lines

  const mha::Tokenizer tokenizer = mha::load_hf_tokenizer(dir);
  std::vector<std::vector<int64_t>> ids;
  nlohmann::json encode = nlohmann::json::array(), decode = nlohmann::json::array();
  for (int round = 0; round < rounds; ++round) {
    encode.push_back(lines_per_second(lines.size(), [&] { ids = tokenizer.encode_each(lines); }));
    decode.push_back(lines_per_second(lines.size(), [&] { tokenizer.batch_decode(ids); }));
  }
  size_t total = 0;
  for (const auto& row : ids) total += row.size();
  std::cout << nlohmann::json{{"lines", lines.size()},
                              {"ids", total},
                              {"encode_lines_per_s", encode},
                              {"decode_lines_per_s", decode}}
                   .dump()
            << "\n";
  return 0;
}
