// Per-token decoding cost at cache length T (E=512, H=8, float32,
// batch_first, eval, InferenceMode), in one process and on the same threads:
//   decode/cached/N:<n>/T:<t>/threads:<k>     forward_cached, one new token
//   decode/floor/N:<n>/T:<t>/threads:<k>      the same ATen calls issued directly on
//                                             preallocated buffers (linear, copy into
//                                             the cache slice, SDPA, linear)
//   decode/recompute/N:<n>/T:<t>/threads:<k>  forward on the whole prefix (T + 1
//                                             positions, causal), as without a cache
// Each step appends position T; the cache is then set back to length T (a
// private hook), so every iteration measures the same length. Counter
// cache_bytes: the cache's buffers. Python's fairseq-style loop is timed by
// scripts/bench_decoding_python.py; scripts/bench_decoding.sh runs both.
// --decode_smoke: each benchmark once, one iteration, outputs cross-checked.
// --decode_paired=K: instead of Google Benchmark, K rounds per (N, T) on one
// thread, each round one cached step then one floor step; prints the median of
// each and the median of the per-round ratios, which a busy machine disturbs
// less than separate timings.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <mha/kv_cache.h>
#include <mha/multihead_attention.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cache/kv_cache_state.h"

namespace {

using torch::Tensor;

constexpr int64_t kEmbed = 512, kHeads = 8, kHeadDim = kEmbed / kHeads;
bool smoke = false;
bool any_error = false;

struct Decoder {
  mha::MultiheadAttention attn{mha::MultiheadAttentionOptions(kEmbed, kHeads).batch_first(true)};
  mha::KVCache cache = mha::KVCache::self_attention();
  Tensor prefix;            // (N, T, E)
  Tensor token;             // (N, 1, E)
  Tensor floor_k, floor_v;  // (N, H, T + 1, hd), the floor's preallocated cache

  Decoder(int64_t n, int64_t t) {
    torch::manual_seed(0);
    attn->eval();
    prefix = torch::randn({n, t, kEmbed});
    token = torch::randn({n, 1, kEmbed});
    cache = mha::KVCache::self_attention(t + 1);
    attn->forward_cached(prefix, prefix, prefix, cache);
    auto& state = mha::detail::kv_cache_state(cache);
    floor_k = state.keys.clone();
    floor_v = state.values.clone();
  }

  Tensor cached() {
    Tensor out = std::get<0>(attn->forward_cached(token, token, token, cache));
    mha::detail::kv_cache_state(cache).length -= 1;  // back to length T
    return out;
  }

  Tensor floor() {
    const int64_t n = token.size(0), t = prefix.size(1);
    const auto qkv = at::linear(token, attn->in_proj_weight, attn->in_proj_bias).chunk(3, -1);
    auto heads = [&](const Tensor& x) { return x.view({n, 1, kHeads, kHeadDim}).transpose(1, 2); };
    floor_k.narrow(2, t, 1).copy_(heads(qkv[1]));
    floor_v.narrow(2, t, 1).copy_(heads(qkv[2]));
    const Tensor out = at::scaled_dot_product_attention(
        heads(qkv[0]), floor_k.narrow(2, 0, t + 1), floor_v.narrow(2, 0, t + 1));  // (N, H, 1, hd)
    return at::linear(out.transpose(1, 2).reshape({n, 1, kEmbed}), attn->out_proj->weight,
                      attn->out_proj->bias);
  }

  Tensor recompute() {
    const Tensor x = at::cat({prefix, token}, 1);  // (N, T + 1, E)
    const int64_t len = x.size(1);
    const Tensor causal = torch::ones({len, len}, torch::kBool).triu(1);
    const Tensor out = std::get<0>(attn->forward(x, x, x, {}, false, causal, true, true));
    return out.narrow(1, len - 1, 1);
  }
};

void run(benchmark::State& state, const std::string& impl, int64_t n, int64_t t, int threads) {
  at::set_num_threads(threads);
  c10::InferenceMode inference;
  Decoder d(n, t);
  auto step = [&] {
    return impl == "cached" ? d.cached() : impl == "floor" ? d.floor() : d.recompute();
  };
  // Checked against the full forward where it takes well under a second, else
  // cached and floor against each other.
  const Tensor expected = n * t <= 8192 ? d.recompute() : impl == "floor" ? d.cached() : d.floor();
  if (!torch::allclose(step(), expected, 1e-4, 1e-5)) {
    std::fprintf(stderr, "decode_bench: %s N=%ld T=%ld differs from its reference\n", impl.c_str(),
                 static_cast<long>(n), static_cast<long>(t));
    any_error = true;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(step());
  }
  state.counters["cache_bytes"] = static_cast<double>(d.cache.memory_bytes());
}

void register_all() {
  for (const std::string impl : {"cached", "floor", "recompute"}) {
    for (const int64_t n : {1, 8}) {
      for (const int64_t t : {128, 1024, 4096}) {
        if (impl == "recompute" && n * t > 8192) continue;  // seconds per call
        for (const int threads : {1, 2}) {
          const std::string name = "decode/" + impl + "/N:" + std::to_string(n) +
                                   "/T:" + std::to_string(t) +
                                   "/threads:" + std::to_string(threads);
          auto* b = benchmark::RegisterBenchmark(
              name.c_str(), [=](benchmark::State& s) { run(s, impl, n, t, threads); });
          b->Unit(benchmark::kMicrosecond)->UseRealTime();
          if (smoke) {
            b->Iterations(1)->Repetitions(1);
          } else if (impl == "recompute") {
            b->Iterations(n * t >= 4096 ? 1 : 5)->Repetitions(3);
          } else {
            b->MinTime(0.1)->Repetitions(5);
          }
        }
      }
    }
  }
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

/// --decode_paired: cached and floor steps alternated, K rounds per shape.
void run_paired(int rounds) {
  at::set_num_threads(1);
  c10::InferenceMode inference;
  std::printf("| N | T | cached µs | floor µs | median cached / floor |\n|---|---|---|---|---|\n");
  for (const int64_t n : {1, 8}) {
    for (const int64_t t : {128, 1024, 4096}) {
      Decoder d(n, t);
      std::vector<double> cached, floor, ratio;
      auto time = [](auto&& fn) {
        const auto start = std::chrono::steady_clock::now();
        benchmark::DoNotOptimize(fn());
        return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count();
      };
      for (int r = 0; r < rounds; ++r) {
        cached.push_back(time([&] { return d.cached(); }));
        floor.push_back(time([&] { return d.floor(); }));
        ratio.push_back(cached.back() / floor.back());
      }
      std::printf("| %ld | %ld | %.1f | %.1f | %.3f |\n", static_cast<long>(n),
                  static_cast<long>(t), median(cached), median(floor), median(ratio));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--decode_paired=", 16) == 0) {
      run_paired(std::atoi(argv[i] + 16));
      return 0;
    }
    if (std::strcmp(argv[i], "--decode_smoke") == 0) {
      smoke = true;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return any_error ? 1 : 0;
}
