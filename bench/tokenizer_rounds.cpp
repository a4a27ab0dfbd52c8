// tokenizer_rounds: mha's side of scripts/bench_tokenizers.py, which times
// mha::Tokenizer against the `tokenizers` package (its Rust batch calls,
// called from Python) on the same directory and lines.
// Usage: tokenizer_rounds DIR THREADS ROUNDS
// Reads DIR/mha_reference.json's corpus lines (scripts/export_tokenizer_reference.py;
// the edge cases at its end left out), and on THREADS intra-op threads
// (at::set_num_threads) times, ROUNDS times each: encoding every line (the
// ids with special tokens, each line one task of at::parallel_for, as
// Tokenizer::encode_batch runs them, without its padding) and decoding every
// line's ids. Prints one JSON object: the lines, the ids in all, and each
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
  const auto n = static_cast<int64_t>(lines.size());
  std::vector<std::vector<int64_t>> ids(lines.size());
  std::vector<std::string> texts(lines.size());
  nlohmann::json encode = nlohmann::json::array(), decode = nlohmann::json::array();
  for (int round = 0; round < rounds; ++round) {
    encode.push_back(lines_per_second(lines.size(), [&] {
      at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) ids[i] = tokenizer.encode(lines[i]);
      });
    }));
    decode.push_back(lines_per_second(lines.size(), [&] {
      at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) texts[i] = tokenizer.decode(ids[i]);
      });
    }));
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
