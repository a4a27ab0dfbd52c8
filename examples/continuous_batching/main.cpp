// Continuous batching with mha::ContinuousBatch: the sources of a seq2seq
// reference file (scripts/export_seq2seq_reference.py: a small nn.Transformer
// trained on reversing digits, its sources and Python's greedy tokens) become
// requests that arrive one every `--every` steps, each asking for a different
// number of tokens (its end: the step count, since this model has no end
// token). Each step decodes one token for every active request as one batch;
// a request leaves when it is done and its blocks go back to the pool. Prints
// the throughput and the latencies, and exits 1 unless every request's tokens
// are Python's (greedy decoding of each source alone). It serves them twice:
// by default, and with ContinuousBatchOptions::batch_invariant (its cost).
// Usage: mha_continuous_batching FILE.pt [--every=K]

#include <mha/batching.h>
#include <mha/state_dict.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "seq2seq_model.h"

namespace {

using Clock = std::chrono::steady_clock;
using torch::Tensor;

/// One request: its source's row, how many tokens it wants, what it got.
struct Request {
  int64_t row, steps;
  std::vector<int64_t> tokens;  // BOS first
  Clock::time_point arrival, first_token, done;
};

double ms(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(p * static_cast<double>(values.size() - 1))];
}

/// The encoder's memory of one source `src` (1, S) with its padding (S) or
/// none: (S, E), the padding left out later by the batch.
Tensor memory_of(seq2seq::Model& model, const Tensor& src, const Tensor& padding) {
  auto& t = model->transformer;
  const Tensor mask = padding.defined() ? padding.unsqueeze(0) : Tensor();  // (1, S)
  const Tensor memory = t->encode(model->inputs(src, 0), {}, mask);  // (1, S, E) or (S, 1, E)
  return model->config.batch_first ? memory.squeeze(0) : memory.squeeze(1);
}

/// Serves every source of `file` as requests arriving one every `every`
/// steps; prints the throughput and latencies; whether every request's
/// tokens are Python's.
bool serve(seq2seq::Model& model,
           const std::map<std::string, Tensor>& file,
           int64_t every,
           bool batch_invariant) {
  const Tensor &src = file.at("src"), &python_tokens = file.at("tokens");  // (N, S), (N, 1 + steps)
  const auto padding = file.find("src_key_padding_mask");
  const int64_t n = src.size(0), max_steps = python_tokens.size(1) - 1;
  mha::ContinuousBatch batch(  // over the Transformer's decoder
      model->transformer,
      mha::ContinuousBatchOptions().block_size(4).num_blocks(64).batch_invariant(batch_invariant));
  std::vector<Request> requests;
  std::map<int64_t, size_t> active;  // batch id -> request
  const auto start = Clock::now();
  int64_t generated = 0;
  for (int64_t step = 0; static_cast<int64_t>(requests.size()) < n || !active.empty(); ++step) {
    if (step % every == 0 && static_cast<int64_t>(requests.size()) < n) {  // an arrival
      const int64_t row = static_cast<int64_t>(requests.size());
      const Tensor pad = padding == file.end() ? Tensor() : padding->second[row];  // (S) or none
      requests.push_back({row, max_steps - row % 3, {model->config.bos}, Clock::now(), {}, {}});
      const Tensor memory = memory_of(model, src.narrow(0, row, 1), pad);
      active[batch.add(memory, pad)] = requests.size() - 1;
    }
    std::map<int64_t, Tensor> inputs;  // each active request's newest token, embedded: (1, E)
    for (const auto& [id, r] : active) {
      const auto& tokens = requests[r].tokens;
      const Tensor newest = torch::tensor({tokens.back()}).view({1, 1});
      inputs[id] = model->inputs(newest, static_cast<int64_t>(tokens.size()) - 1).view({1, -1});
    }
    for (const auto& [id, out] : batch.step(inputs)) {
      Request& request = requests[active[id]];
      request.tokens.push_back(model->logits(out.unsqueeze(0)).argmax(-1).item<int64_t>());
      ++generated;
      if (request.tokens.size() == 2) request.first_token = Clock::now();
      if (static_cast<int64_t>(request.tokens.size()) == request.steps + 1) {
        request.done = Clock::now();
        batch.remove(id);
        active.erase(id);
      }
    }
  }
  const double total_ms = ms(start, Clock::now());
  bool same = true;
  std::vector<double> first_token_ms, per_token_ms;
  for (const auto& r : requests) {
    const Tensor expected = python_tokens[r.row].narrow(0, 0, r.steps + 1);
    same = same && torch::equal(torch::tensor(r.tokens), expected);
    first_token_ms.push_back(ms(r.arrival, r.first_token));
    per_token_ms.push_back(ms(r.arrival, r.done) / static_cast<double>(r.steps));
  }
  std::printf("%s: %ld requests, one every %ld steps, %ld tokens in %.1f ms: %.0f tokens/s\n",
              batch_invariant ? "batch_invariant" : "default", static_cast<long>(n),
              static_cast<long>(every), static_cast<long>(generated), total_ms,
              1e3 * static_cast<double>(generated) / total_ms);
  std::printf(
      "  time to first token p50 %.2f ms, p99 %.2f ms; per token p50 %.2f ms, p99 %.2f ms\n",
      percentile(first_token_ms, 0.5), percentile(first_token_ms, 0.99),
      percentile(per_token_ms, 0.5), percentile(per_token_ms, 0.99));
  std::printf(same ? "  every request's tokens are Python's\n"
                   : "  some request's tokens differ from Python's\n");
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s REFERENCE.pt [--every=K]\n", argv[0]);
    return 2;
  }
  const int64_t every = argc > 2 ? std::stoll(std::string(argv[2]).substr(8)) : 2;
  const auto file = mha::read_state_dict(argv[1]);
  seq2seq::Model model = seq2seq::load_model(file);
  torch::NoGradGuard no_grad;
  const bool same = serve(model, file, every, false);
  const bool same_invariant = serve(model, file, every, true);
  return same && same_invariant ? 0 : 1;
}
