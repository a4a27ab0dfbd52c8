// serving_bench: requests arriving as a Poisson stream, served three ways by
// the seq2seq model of a peer-benchmark case file (scripts/peers: 6 + 6
// layers, d_model 512, vocabulary 8000, seeded weights; `--weights`):
//   one_at_a_time  each request alone (decode_cached, N = 1), in arrival order
//   static_8       batches of 8 in arrival order, sources padded to the
//                  longest (src_key_padding_mask), decoded until the longest
//                  output is done
//   continuous     mha::ContinuousBatch: admitted on arrival, one token per
//                  active request per step (the packed step: the step's tokens
//                  embedded, and their logits projected, in one call each),
//                  removed when done (and with
//                  --batch-invariant-too, again in batch_invariant mode;
//                  with --sources-together, again with the sources arrived
//                  before a step encoded in one add_sources call instead of
//                  one encode each). --continuous-only: no other server.
// Requests (fixed seed): source lengths and output lengths uniform in
// [--min-len, --max-len]; each request ends after its output length (the
// seeded model has no end token). Arrivals: exponential gaps at
// `--rate` requests/s (0: `--load` times the rate one request at a time
// serves, measured on the first 4 requests). Encoder runs are included.
// Prints per way: throughput (generated tokens / (first arrival to last
// completion)), time to first token and per output token p50/p99; for
// continuous batching, the cache's peak bytes in use over the bytes of the
// positions it held then. The model's weights are prepacked (mha::prepack), a
// server's choice.
// --out-len=N: every request generates N tokens (as CTranslate2's
// translate_batch in scripts/peers/serving_rows.py); --at-once: all arrive at
// 0 (an offline batch); --requests-file=FILE: the sources serving_rows.py
// saved (`src.<i>`, (1, S) int64: the same requests for both engines);
// default: mha::prepack's layout for this CPU (PrepackOptions::panels);
// --int8: mha::quantize_dynamic instead of prepacked float32; --panels: as
// load_hf_model holds a seq2seq LM: the decoder and output projection in
// panels, the encoder in prepack's layout for this CPU (--encoder-panels:
// in panels, --encoder-onednn: in oneDNN's layout, on any CPU);
// --invariant-rows=R: the batch-invariant run's GEMM row block (default 8);
// --profile: then the top-level ATen ops of one add_sources call of every
// request and of the step at half the output length (step_timing.h).
// Usage: serving_bench --weights=FILE [--requests=64] [--min-len=16]
//        [--max-len=256] [--out-len=N] [--requests-file=F]
//        [--rate=R | --load=2 | --at-once] [--threads=T]
//        [--int8 | --panels [--encoder-panels | --encoder-onednn]]
//        [--batch-invariant-too] [--invariant-rows=R] [--sources-together] [--continuous-only]
//        [--profile]

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <mha/batching.h>
#include <mha/prepack.h>
#include <mha/quantization.h>
#include <mha/state_dict.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "seq2seq_model.h"
#include "step_timing.h"

namespace {

using Clock = std::chrono::steady_clock;
using torch::Tensor;

struct Request {
  Tensor src;  // (1, S) token ids
  int64_t out_len = 0;
  double arrival = 0, first_token = 0, done = 0;  // seconds from the start
};

struct Args {
  std::string weights, requests_file;
  int64_t requests = 64, min_len = 16, max_len = 256, threads = 1;
  int64_t out_len = 0;  // 0: uniform in [min_len, max_len]
  int64_t invariant_rows = 8;
  double rate = 0, load = 2;
  bool invariant_too = false, sources_together = false, continuous_only = false;
  bool at_once = false, int8 = false, panels = false, profile = false;
  std::optional<bool> encoder_panels;  // unset: prepack's layout for this CPU
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    const std::string key = arg.substr(0, eq), value = eq == arg.npos ? "" : arg.substr(eq + 1);
    if (key == "--weights")
      a.weights = value;
    else if (key == "--requests")
      a.requests = std::stoll(value);
    else if (key == "--min-len")
      a.min_len = std::stoll(value);
    else if (key == "--max-len")
      a.max_len = std::stoll(value);
    else if (key == "--rate")
      a.rate = std::stod(value);
    else if (key == "--load")
      a.load = std::stod(value);
    else if (key == "--threads")
      a.threads = std::stoll(value);
    else if (key == "--batch-invariant-too")
      a.invariant_too = true;
    else if (key == "--requests-file")
      a.requests_file = value;
    else if (key == "--invariant-rows")
      a.invariant_rows = std::stoll(value);
    else if (key == "--out-len")
      a.out_len = std::stoll(value);
    else if (key == "--at-once")
      a.at_once = true;
    else if (key == "--int8")
      a.int8 = true;
    else if (key == "--panels")
      a.panels = true;
    else if (key == "--encoder-panels")
      a.encoder_panels = true;
    else if (key == "--encoder-onednn")
      a.encoder_panels = false;
    else if (key == "--sources-together")
      a.sources_together = true;
    else if (key == "--profile")
      a.profile = true;
    else if (key == "--continuous-only")
      a.continuous_only = true;
    else
      TORCH_CHECK(false, "serving_bench: unknown argument ", arg);
  }
  TORCH_CHECK(!a.weights.empty(), "usage: serving_bench --weights=FILE [...]");
  return a;
}

std::vector<Request> make_requests(const Args& a, int64_t vocab) {
  std::mt19937 random(1234);
  std::uniform_int_distribution<int64_t> length(a.min_len, a.max_len);
  std::vector<Request> requests(a.requests);
  for (auto& r : requests) {
    r.src = torch::randint(4, vocab, {1, length(random)}, torch::kLong);
    r.out_len = length(random);
    if (a.out_len > 0) r.out_len = a.out_len;
  }
  if (!a.requests_file.empty()) {  // the sources scripts/peers/serving_rows.py serves
    const auto sources = mha::read_state_dict(a.requests_file);
    for (size_t i = 0; i < requests.size(); ++i) {
      requests[i].src = sources.at("src." + std::to_string(i));  // (1, S)
    }
  }
  return requests;
}

void set_arrivals(std::vector<Request>& requests, double rate) {
  std::mt19937 random(99);
  std::exponential_distribution<double> gap(rate);
  double t = 0;
  for (auto& r : requests) r.arrival = t += gap(random);
  const double first = requests.front().arrival;
  for (auto& r : requests) r.arrival -= first;  // the first arrives at 0
}

/// Seconds since `start`; waits (sleeping) until `until` first when given.
double now(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
void wait_until(Clock::time_point start, double until) {
  const double left = until - now(start);
  if (left > 0) std::this_thread::sleep_for(std::chrono::duration<double>(left));
}

/// The newest tokens (N, 1) of greedy steps: logits of decoded (N, 1, E) or (1, N, E).
Tensor next_tokens(seq2seq::Model& model, const Tensor& decoded) {
  return model->logits(decoded).select(1, 0).argmax(-1, /*keepdim=*/true);  // (N, 1)
}

void one_at_a_time(seq2seq::Model& model, std::vector<Request>& requests) {
  const auto start = Clock::now();
  auto& t = model->transformer;
  for (auto& r : requests) {
    wait_until(start, r.arrival);
    const Tensor memory = t->encode(model->inputs(r.src, 0));
    auto cache = t->make_decoder_cache(r.out_len);
    Tensor newest = torch::full({1, 1}, model->config.bos, torch::kLong);
    for (int64_t step = 0; step < r.out_len; ++step) {
      newest = next_tokens(model, t->decode_cached(model->inputs(newest, step), memory, cache));
      if (step == 0) r.first_token = now(start);
    }
    r.done = now(start);
  }
}

void static_batches(seq2seq::Model& model, std::vector<Request>& requests, int64_t size) {
  const auto start = Clock::now();
  auto& t = model->transformer;
  for (size_t b = 0; b < requests.size(); b += size) {
    const size_t end = std::min(requests.size(), b + static_cast<size_t>(size));
    wait_until(start, requests[end - 1].arrival);  // the batch starts when its last member is in
    int64_t src_len = 0, steps = 0;
    for (size_t i = b; i < end; ++i) {
      src_len = std::max(src_len, requests[i].src.size(1));
      steps = std::max(steps, requests[i].out_len);
    }
    const auto n = static_cast<int64_t>(end - b);
    Tensor src = torch::zeros({n, src_len}, torch::kLong);
    Tensor padding = torch::ones({n, src_len}, torch::kBool);  // true = padding
    for (size_t i = b; i < end; ++i) {
      const int64_t len = requests[i].src.size(1);
      src[static_cast<int64_t>(i - b)].narrow(0, 0, len).copy_(requests[i].src[0]);
      padding[static_cast<int64_t>(i - b)].narrow(0, 0, len).fill_(false);
    }
    const Tensor memory = t->encode(model->inputs(src, 0), {}, padding);
    auto cache = t->make_decoder_cache(steps);
    Tensor newest = torch::full({n, 1}, model->config.bos, torch::kLong);
    for (int64_t step = 0; step < steps; ++step) {
      newest = next_tokens(
          model, t->decode_cached(model->inputs(newest, step), memory, cache, {}, padding));
      for (size_t i = b; i < end; ++i) {
        if (step == 0) requests[i].first_token = now(start);
        if (step + 1 == requests[i].out_len) requests[i].done = now(start);
      }
    }
  }
}

/// Admits the requests `arrived` to `batch`: each source encoded on its own
/// and add()ed, or all in one add_sources call (`together`). Their ids.
std::vector<int64_t> admit(seq2seq::Model& model,
                           mha::ContinuousBatch& batch,
                           const std::vector<Request>& requests,
                           const std::vector<size_t>& arrived,
                           bool together) {
  auto& t = model->transformer;
  std::vector<Tensor> sources;  // (S, E) each
  std::vector<int64_t> ids;
  for (const size_t r : arrived) {
    const Tensor src = model->inputs(requests[r].src, 0);  // (1, S, E) or (S, 1, E)
    if (together) {
      sources.push_back(src.reshape({-1, src.size(-1)}));
    } else {
      const Tensor memory = t->encode(src);  // shaped as src
      ids.push_back(batch.add(memory.reshape({-1, memory.size(-1)})));
    }
  }
  return together ? batch.add_sources(sources) : ids;
}

/// The pool of every continuous server: blocks of 16 positions, 4,096 of them
/// for the requests' own keys and values and 4,096 for their memories'.
mha::ContinuousBatchOptions batch_options() {
  return mha::ContinuousBatchOptions().block_size(16).num_blocks(4096).num_memory_blocks(4096);
}

/// The continuous server (batch-invariant with GEMM blocks of
/// `invariant_rows` rows, 0: not); returns the cache's bytes in use over the
/// bytes of the positions it held, at the step where the bytes in use peaked.
double continuous(seq2seq::Model& model,
                  std::vector<Request>& requests,
                  int64_t invariant_rows,
                  bool sources_together) {
  auto& t = model->transformer;
  mha::ContinuousBatch batch(t, batch_options()
                                    .batch_invariant(invariant_rows > 0)
                                    .invariant_rows(std::max<int64_t>(invariant_rows, 1)));
  const int64_t layers = model->config.num_layers;  // the decoder's
  const int64_t position_bytes =
      2 * model->config.d_model * 4 * layers;  // float32 k and v, all layers
  const auto start = Clock::now();
  std::map<int64_t, size_t> active;  // id -> request
  std::map<size_t, int64_t> made;    // request -> tokens made
  std::map<size_t, int64_t> newest;  // request -> its last token
  size_t next = 0;
  int64_t peak_used = 0;
  double peak_ratio = 0;
  while (next < requests.size() || !active.empty()) {
    if (active.empty()) wait_until(start, requests[next].arrival);
    std::vector<size_t> arrived;
    for (; next < requests.size() && requests[next].arrival <= now(start); ++next) {
      arrived.push_back(next);
      newest[next] = model->config.bos;
      made[next] = 0;
    }
    const std::vector<int64_t> admitted = admit(model, batch, requests, arrived, sources_together);
    for (size_t i = 0; i < admitted.size(); ++i) active[admitted[i]] = arrived[i];
    // The step packed: every active request's newest token, embedded in one call.
    std::vector<int64_t> ids, tokens, positions;
    int64_t held = 0;
    for (const auto& [id, r] : active) {
      ids.push_back(id);
      tokens.push_back(newest[r]);
      positions.push_back(made[r]);
      held += batch.length(id) + 1 + requests[r].src.size(1);  // self (after the step) and memory
    }
    const Tensor rows = model->embed(torch::tensor(tokens)) + model->pos(torch::tensor(positions));
    const Tensor out = batch.step(rows, ids, std::vector<int64_t>(ids.size(), 1));  // (N, E)
    if (batch.used_bytes() > peak_used) {
      peak_used = batch.used_bytes();
      peak_ratio = static_cast<double>(peak_used) / static_cast<double>(held * position_bytes);
    }
    const Tensor chosen = mha::linear(model->out, out).argmax(-1);  // (N,): one projection
    for (size_t i = 0; i < ids.size(); ++i) {
      const size_t r = active[ids[i]];
      newest[r] = chosen[static_cast<int64_t>(i)].item<int64_t>();
      if (made[r]++ == 0) requests[r].first_token = now(start);
      if (made[r] == requests[r].out_len) {
        requests[r].done = now(start);
        batch.remove(ids[i]);
        active.erase(ids[i]);
      }
    }
  }
  return peak_ratio;
}

/// --profile: the top-level ATen ops of one add_sources call of every request,
/// then of the packed step at `steps` tokens (each line the ops' ms and calls).
void profile_together(seq2seq::Model& model, const std::vector<Request>& requests, int64_t steps) {
  mha::ContinuousBatch batch(model->transformer, batch_options());
  std::vector<size_t> all(requests.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::vector<int64_t> ids;
  step_timing::print_top_level_ops(
      "add_sources", [&] { ids = admit(model, batch, requests, all, true); }, 12);
  const auto step = [&](int64_t position) {  // (N, E) rows of token 4 at `position`
    const auto n = static_cast<int64_t>(ids.size());
    const Tensor rows = model->embed(torch::full({n}, 4, torch::kLong)) +
                        model->pos(torch::full({n}, position, torch::kLong));
    mha::linear(model->out, batch.step(rows, ids, std::vector<int64_t>(ids.size(), 1))).argmax(-1);
  };
  for (int64_t position = 0; position + 1 < steps; ++position) step(position);
  step_timing::print_top_level_ops("step " + std::to_string(steps), [&] { step(steps - 1); }, 12);
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

void report(const char* name, const std::vector<Request>& requests, const std::string& extra) {
  int64_t tokens = 0;
  double last = 0;
  std::vector<double> ttft, per_token;
  for (const auto& r : requests) {
    tokens += r.out_len;
    last = std::max(last, r.done);
    ttft.push_back(1e3 * (r.first_token - r.arrival));
    per_token.push_back(1e3 * (r.done - r.first_token) /
                        static_cast<double>(std::max<int64_t>(r.out_len - 1, 1)));
  }
  std::printf("| %s | %.1f | %.1f | %.0f / %.0f | %.1f / %.1f |%s\n", name,
              static_cast<double>(tokens) / last, last, percentile(ttft, 0.5),
              percentile(ttft, 0.99), percentile(per_token, 0.5), percentile(per_token, 0.99),
              extra.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  at::set_num_threads(static_cast<int>(args.threads));
  seq2seq::Model model = seq2seq::load_model(mha::read_state_dict(args.weights));
  if (args.int8) {
    mha::quantize_dynamic(model);
  } else {
    if (args.panels) {
      mha::prepack(*model->transformer->decoder.ptr(), mha::PrepackOptions().panels(true));
      mha::prepack(model->out, mha::PrepackOptions().panels(true));
      mha::prepack(model, mha::PrepackOptions().panels(args.encoder_panels));  // the encoder
    } else {
      mha::prepack(model);  // the CPU's default layout (PrepackOptions::panels)
    }
  }
  torch::NoGradGuard no_grad;
  std::vector<Request> requests = make_requests(args, model->config.vocab);
  double rate = args.rate;
  if (args.at_once) {
    for (auto& r : requests) r.arrival = 0;
  } else if (rate == 0) {  // the rate one request at a time serves, from the first 4 requests
    std::vector<Request> probe(requests.begin(),
                               requests.begin() + std::min<int64_t>(4, args.requests));
    for (auto& r : probe) r.arrival = 0;
    one_at_a_time(model, probe);
    rate = args.load * static_cast<double>(probe.size()) / probe.back().done;
  }
  if (!args.at_once) set_arrivals(requests, rate);
  const std::string arrivals = args.at_once
                                   ? "all arriving at once"
                                   : fmt::format("Poisson arrivals at {:.2f} requests/s", rate);
  const std::string outputs = args.out_len > 0 ? std::to_string(args.out_len) : "as the lengths";
  std::printf(
      "serving_bench: %ld requests, lengths %ld-%ld, outputs %s, %s weights, %s, %ld thread(s)\n\n"
      "| server | tokens/s | makespan s | time to first token p50 / p99 ms | per token p50 / "
      "p99 ms | cache bytes / held |\n|---|---|---|---|---|---|\n",
      static_cast<long>(args.requests), static_cast<long>(args.min_len),
      static_cast<long>(args.max_len), outputs.c_str(),
      args.int8 ? "int8"
      : args.panels
          ? (!args.encoder_panels   ? "float32, decoder in panels, encoder in prepack's layout"
             : *args.encoder_panels ? "float32, decoder and encoder in panels"
                                    : "float32, decoder in panels, encoder in oneDNN's")
          : "prepacked float32 (prepack's default layout)",
      arrivals.c_str(), static_cast<long>(args.threads));
  auto run = requests;
  if (!args.continuous_only) {
    one_at_a_time(model, run);
    report("one at a time", run, " - |");
    run = requests;
    static_batches(model, run, 8);
    report("static batches of 8", run, " - |");
  }
  const auto serve = [&](const char* name, int64_t invariant_rows, bool together) {
    run = requests;
    const double ratio = continuous(model, run, invariant_rows, together);
    report(name, run, " " + std::to_string(ratio).substr(0, 4) + " |");
  };
  serve("continuous", 0, false);
  if (args.sources_together) serve("continuous, sources encoded together", 0, true);
  if (args.invariant_too) serve("continuous, batch_invariant", args.invariant_rows, false);
  if (args.profile) profile_together(model, requests, std::max<int64_t>(args.out_len / 2, 1));
  return 0;
}
