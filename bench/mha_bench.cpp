// Benchmarks of mha::MultiheadAttention against LibTorch's
// torch::nn::MultiheadAttention, the composite floor (linear + SDPA + linear
// called directly) and the GEMM peak (a large at::mm), in one process and on
// the same intra-op threads. Python's nn.MultiheadAttention is measured by
// scripts/bench_python.py on the same shapes; scripts/bench.sh runs both and
// writes bench/results/, docs/benchmarks.md and the plot.
//
// Benchmark names (parsed by scripts/bench_report.py):
//   infer/<impl>/N:<n>/L:<l>/nw:<0|1>/kpm:<0|1>/causal:<0|1>/threads:<t>
//   train/<impl>/N:<n>/L:<l>/nw:<0|1>/threads:<t>          forward + backward
//   crossover/<fused|native>/N:<n>/L:<l>/kpm:<0|1>/causal:<0|1>/threads:<t>
//                                                            the fused-path threshold
//   weights/<byhead|native>/N:<n>/L:<l>/kpm:<0|1>/causal:<0|1>/avg:<0|1>/threads:<t>
//                                                            the weights rule
//   gemm/threads:<t>                                         at::mm, 2048^3
// impl: ours (mha::MultiheadAttention), seqfirst (the same module sequence-first,
// nn.MultiheadAttention's default layout; need_weights=false only), libtorch
// (torch::nn::MultiheadAttention), floor (the raw ops). Counters: flops (per call, the issue's
// formula), peak_bytes (allocator bytes one call allocates, its output included),
// python_path_peak_bytes (the same, for the ATen ops Python's module runs).
//
// Extra flags: --mha_smoke (CI: each shape once, with one flag combination per
// shape, one thread count, 1 iteration, the output checks kept),
// --mha_shapes=1x16,8x128 (N x L), --mha_threads=1,2,
// --mha_families=infer,train,crossover,weights,gemm, --mha_min_length=L (override the
// fused path's threshold, for exploring), --mha_profile=N,L,nw,kpm,causal,threads
// (instead of benchmarks: a per-op self-time table of each implementation,
// from the Kineto profiler, for docs/benchmarks.md), --mha_profile_train=N,L,nw,threads
// (the same for forward + backward).

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <mha/multihead_attention.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/headeronly/version.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "attention/fast_kernels.h"
#include "counting_allocator.h"
#include "tolerances.h"

namespace {

using torch::Tensor;

constexpr double kInf = std::numeric_limits<double>::infinity();

// ~~~ Configuration ~~~

struct Shape {
  int64_t batch;    // N
  int64_t seq_len;  // L = S
};

/// bench/grid.json: the grid, shared with scripts/bench_python.py and bench.sh.
struct Grid {
  int64_t embed_dim;  // E
  int64_t num_heads;  // H
  int64_t gemm_size;  // the GEMM peak: (size x size) @ (size x size)
  std::vector<Shape> infer_shapes, train_shapes, crossover_shapes, weights_shapes;
  double projection_flops, core_flops, causal_core_factor, train_factor;
};

const Grid& grid() {
  static const Grid g = [] {
    std::ifstream file(MHA_BENCH_GRID);
    TORCH_CHECK(file, "mha_bench: cannot read ", MHA_BENCH_GRID);
    const auto j = nlohmann::json::parse(file);
    auto shapes = [&](const char* key) {
      std::vector<Shape> out;
      for (const auto& s : j.at(key))
        out.push_back({s.at(0).get<int64_t>(), s.at(1).get<int64_t>()});
      return out;
    };
    const auto& f = j.at("flops");
    return Grid{j.at("embed_dim").get<int64_t>(),
                j.at("num_heads").get<int64_t>(),
                j.at("gemm_size").get<int64_t>(),
                shapes("infer_shapes"),
                shapes("train_shapes"),
                shapes("crossover_shapes"),
                shapes("weights_shapes"),
                f.at("projection").get<double>(),
                f.at("core").get<double>(),
                f.at("causal_core_factor").get<double>(),
                f.at("train_factor").get<double>()};
  }();
  return g;
}

struct Flags {
  bool smoke = false;
  std::set<std::string> shapes;  // "NxL"; empty = all
  std::vector<int> threads = {1, 2};
  std::set<std::string> families = {"infer", "train", "crossover", "weights", "gemm"};
  int64_t min_length = 0;     // fused-path threshold override for exploration; 0 = default
  std::string profile;        // "N,L,nw,kpm,causal,threads": print op profiles, run nothing else
  std::string profile_train;  // "N,L,nw,threads": the same for forward + backward
};

Flags flags;
bool any_error = false;  // a failed output check: the exit status says so (CI smoke)

struct InferConfig {
  Shape shape;
  bool need_weights;
  bool kpm;
  bool causal;
  int threads;
};

/// bench/grid.json's FLOP count of one forward: 8 N L E^2 + 4 N L S E, the
/// core halved when causal.
double attention_flops(Shape s, bool causal) {
  const Grid& g = grid();
  const double n = static_cast<double>(s.batch), l = static_cast<double>(s.seq_len);
  const double e = static_cast<double>(g.embed_dim);
  const double core = g.core_flops * n * l * l * e * (causal ? g.causal_core_factor : 1.0);
  return g.projection_flops * n * l * e * e + core;
}

/// FLOPs of one training step (forward + backward).
double train_flops(Shape s) { return grid().train_factor * attention_flops(s, /*causal=*/false); }

std::string shape_key(Shape s) { return std::to_string(s.batch) + "x" + std::to_string(s.seq_len); }

std::string flag_str(const char* name, bool value) {
  return std::string("/") + name + ":" + (value ? "1" : "0");
}

std::string shape_str(Shape s) {
  return "/N:" + std::to_string(s.batch) + "/L:" + std::to_string(s.seq_len);
}

bool shape_selected(Shape s) {
  return flags.shapes.empty() || flags.shapes.count(shape_key(s)) > 0;
}

// ~~~ Inputs and modules, built once per shape ~~~

/// Everything one shape needs, shared by the implementations so that they see
/// the same weights and inputs.
struct Setup {
  Shape shape;
  mha::MultiheadAttention ours{nullptr};
  mha::MultiheadAttention ours_seq{nullptr};  // the same weights, sequence-first
  torch::nn::MultiheadAttention libtorch{nullptr};
  Tensor x;             // (N, L, E), batch-first: ours, floor, Python
  Tensor x_seq;         // (L, N, E), sequence-first copy: seqfirst, LibTorch
  Tensor kpm;           // (N, L) bool, true = padding
  Tensor causal;        // (L, L) bool, true = masked (MHA's convention)
  Tensor causal_float;  // (L, L) float, -inf above the diagonal (LibTorch needs float)
  Tensor cotangent;     // (N, L, E), for the backward pass
};

std::shared_ptr<Setup> make_setup(Shape s) {
  // Normal tensors even when called under InferenceMode: training reuses them.
  c10::InferenceMode not_inference(/*enabled=*/false);
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  auto setup = std::make_shared<Setup>();
  setup->shape = s;
  setup->ours = mha::MultiheadAttention(
      mha::MultiheadAttentionOptions(grid().embed_dim, grid().num_heads).batch_first(true));
  setup->libtorch = torch::nn::MultiheadAttention(
      torch::nn::MultiheadAttentionOptions(grid().embed_dim, grid().num_heads));
  setup->ours_seq =
      mha::MultiheadAttention(mha::MultiheadAttentionOptions(grid().embed_dim, grid().num_heads));
  // Same weights in all three (only for the output cross-checks).
  const auto weights = setup->ours->named_parameters();
  for (auto& p : setup->ours_seq->named_parameters()) p.value().copy_(weights[p.key()]);
  setup->libtorch->in_proj_weight.copy_(setup->ours->in_proj_weight);
  setup->libtorch->in_proj_bias.copy_(setup->ours->in_proj_bias);
  setup->libtorch->out_proj->weight.copy_(setup->ours->out_proj->weight);
  setup->libtorch->out_proj->bias.copy_(setup->ours->out_proj->bias);
  setup->ours->eval();
  setup->ours_seq->eval();
  setup->libtorch->eval();

  const int64_t n = s.batch, l = s.seq_len;
  setup->x = torch::randn({n, l, grid().embed_dim});
  setup->x_seq = setup->x.transpose(0, 1).contiguous();
  // Every other sequence has its last quarter padded; none is fully padded.
  setup->kpm = torch::zeros({n, l}, torch::kBool);
  for (int64_t b = 0; b < n; b += 2) {
    const int64_t pad = l / 4;
    if (pad > 0) setup->kpm[b].slice(0, l - pad).fill_(true);
  }
  setup->causal = torch::ones({l, l}, torch::kBool).triu(1);
  setup->causal_float = torch::zeros({l, l}).masked_fill_(setup->causal, -kInf);
  setup->cotangent = torch::randn({n, l, grid().embed_dim});
  return setup;
}

std::shared_ptr<Setup> get_setup(Shape s) {
  static std::map<std::string, std::shared_ptr<Setup>> cache;
  auto& entry = cache[shape_key(s)];
  if (!entry) entry = make_setup(s);
  return entry;
}

// ~~~ The implementations ~~~

using FastPathKernel = mha::detail::AttentionKernel;

/// The kernel ours runs: the module's rule, or for calls without weights the
/// --mha_min_length override of the fused kernel's threshold.
FastPathKernel ours_kernel(const Setup& s, const InferConfig& c) {
  if (flags.min_length > 0 && !c.need_weights) {
    return c.shape.seq_len >= flags.min_length ? FastPathKernel::kFused : FastPathKernel::kNative;
  }
  return mha::detail::choose_fast_path_kernel(
      c.shape.batch, c.shape.seq_len, c.need_weights, c.kpm || c.causal,
      mha::detail::has_prepacked_projections(mha::detail::AttentionWeights::of(*s.ours)));
}

/// Every benchmarked call is on Python's fast path (eval, batch-first
/// self-attention, bool masks), computed here with `kernel`.
Tensor run_fast_path(Setup& s, const InferConfig& c, FastPathKernel kernel) {
  const Tensor kpm = c.kpm ? s.kpm : Tensor(), mask = c.causal ? s.causal : Tensor();
  const mha::detail::AttentionCall call{s.x,
                                        s.x,
                                        s.x,
                                        kpm,
                                        mask,
                                        c.need_weights,
                                        /*average_attn_weights=*/true,
                                        /*is_causal=*/c.causal};
  return std::get<0>(
      mha::detail::fast_path_forward(kernel, mha::detail::AttentionWeights::of(*s.ours), call));
}

Tensor run_ours(Setup& s, const InferConfig& c) {
  if (flags.min_length > 0) {
    return run_fast_path(s, c, ours_kernel(s, c));
  }
  return std::get<0>(s.ours->forward(s.x, s.x, s.x, c.kpm ? s.kpm : Tensor(), c.need_weights,
                                     c.causal ? s.causal : Tensor(),
                                     /*average_attn_weights=*/true, /*is_causal=*/c.causal));
}

/// Python's computation for the same call: the native op with Python's merged
/// float masks, exactly the ATen ops Python's module runs.
Tensor run_python_path(Setup& s, const InferConfig& c) {
  return run_fast_path(s, c, FastPathKernel::kPython);
}

/// Whether ours runs the native op (bitwise equal to Python) for this config.
bool ours_is_native(const Setup& s, const InferConfig& c) {
  return ours_kernel(s, c) == FastPathKernel::kNative;
}

/// The sequence-first module on the (L, N, E) input.
Tensor run_seqfirst(Setup& s, const InferConfig& c) {
  return std::get<0>(s.ours_seq->forward(s.x_seq, s.x_seq, s.x_seq, c.kpm ? s.kpm : Tensor(),
                                         c.need_weights, c.causal ? s.causal : Tensor(),
                                         /*average_attn_weights=*/true, /*is_causal=*/c.causal));
}

Tensor run_libtorch(Setup& s, const InferConfig& c) {
  // LibTorch adds a bool attn_mask numerically, so it gets the float causal mask.
  return std::get<0>(s.libtorch->forward(s.x_seq, s.x_seq, s.x_seq, c.kpm ? s.kpm : Tensor(),
                                         c.need_weights, c.causal ? s.causal_float : Tensor()));
}

/// The floor: the fewest ATen calls that compute the same thing.
/// need_weights=false: linear -> SDPA (flash) -> linear, masks in SDPA's form.
/// need_weights=true: the fused native op (the only one that returns weights
/// without separate bmm/softmax calls), masks in its smallest form.
Tensor run_floor(Setup& s, const InferConfig& c) {
  const int64_t n = s.shape.batch, l = s.shape.seq_len, e = grid().embed_dim, h = grid().num_heads;
  auto& m = *s.ours;
  if (!c.need_weights) {
    const Tensor qkv = at::linear(s.x, m.in_proj_weight, m.in_proj_bias).view({n, l, 3, h, e / h});
    const Tensor q = qkv.select(2, 0).transpose(1, 2);
    const Tensor k = qkv.select(2, 1).transpose(1, 2);
    const Tensor v = qkv.select(2, 2).transpose(1, 2);
    std::optional<Tensor> mask;
    bool is_causal = false;
    if (c.kpm && c.causal) {
      mask = at::zeros({n, 1, l, l})
                 .masked_fill_(
                     at::logical_or(s.causal.view({1, 1, l, l}), s.kpm.view({n, 1, 1, l})), -kInf);
    } else if (c.kpm) {
      mask = at::zeros({n, 1, 1, l}).masked_fill_(s.kpm.view({n, 1, 1, l}), -kInf);
    } else if (c.causal) {
      is_causal = true;
    }
    Tensor out = at::scaled_dot_product_attention(q, k, v, mask, 0.0, is_causal);
    out = out.transpose(1, 2).reshape({n, l, e});
    return at::linear(out, m.out_proj->weight, m.out_proj->bias);
  }
  std::optional<Tensor> mask;
  std::optional<int64_t> mask_type;
  if (c.kpm && c.causal) {
    mask =
        at::logical_or(s.causal.view({1, 1, l, l}), s.kpm.view({n, 1, 1, l})).expand({n, h, l, l});
    mask_type = 2;
  } else if (c.kpm) {
    mask = s.kpm;
    mask_type = 1;
  } else if (c.causal) {
    mask = s.causal;
    mask_type = 0;
  }
  return std::get<0>(at::_native_multi_head_attention(
      s.x, s.x, s.x, e, h, m.in_proj_weight, m.in_proj_bias, m.out_proj->weight, m.out_proj->bias,
      mask, /*need_weights=*/true, /*average_attn_weights=*/true, mask_type));
}

using InferFn = Tensor (*)(Setup&, const InferConfig&);

InferFn infer_fn(const std::string& impl) {
  if (impl == "ours") return run_ours;
  if (impl == "seqfirst") return run_seqfirst;
  if (impl == "libtorch") return run_libtorch;
  return run_floor;
}

/// Output in batch-first layout, for the cross-checks.
Tensor batch_first(const std::string& impl, const Tensor& out) {
  return impl == "libtorch" || impl == "seqfirst" ? out.transpose(0, 1) : out;
}

std::string config_key(const InferConfig& c) {
  return shape_key(c.shape) + flag_str("nw", c.need_weights) + flag_str("kpm", c.kpm) +
         flag_str("causal", c.causal);
}

/// Ours' output per config (thread count aside), computed once for the checks.
const Tensor& ours_output(Setup& s, const InferConfig& c) {
  static std::map<std::string, Tensor> cache;
  Tensor& out = cache[config_key(c)];
  if (!out.defined()) out = run_ours(s, c);
  return out;
}

/// `got` against `ref` at the parity tolerance (tools/support/tolerances.h,
/// NaN where NaN). Empty when they agree.
std::string compare(const Tensor& got, const Tensor& ref, const std::string& what) {
  const auto tolerance = mha::support::parity_tolerance(ref.scalar_type());
  if (got.sizes() == ref.sizes() &&
      at::allclose(got, ref, tolerance.rtol, tolerance.atol, /*equal_nan=*/true)) {
    return {};
  }
  std::ostringstream msg;
  msg << what << " beyond rtol " << tolerance.rtol << " / atol " << tolerance.atol;
  if (got.sizes() == ref.sizes()) {
    msg << ": max abs diff " << (got - ref).abs().nan_to_num(0.0).max().item<double>();
  }
  return msg.str();
}

// ~~~ Benchmark bodies ~~~

/// Per-benchmark repetitions and minimum time from the expected cost, so the
/// whole sweep stays within minutes on two cores.
void set_budget(benchmark::internal::Benchmark* b, double flops) {
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
  if (flags.smoke) {
    b->Iterations(1)->Repetitions(1);
    return;
  }
  const double seconds = flops / 4e10 + 2e-5;  // ~40 GFLOP/s effective, plus overhead
  if (seconds > 0.4) {
    b->Iterations(1)->Repetitions(2);  // the longest shapes: fewer repetitions
  } else if (seconds > 0.15) {
    b->Iterations(1)->Repetitions(3);
  } else if (seconds > 0.02) {
    b->MinTime(0.1)->Repetitions(5);
  } else {
    b->MinTime(0.05)->Repetitions(9);
  }
}

void infer_benchmark(benchmark::State& state,
                     const std::string& name,
                     const std::string& impl,
                     InferConfig c) {
  at::set_num_threads(c.threads);
  c10::InferenceMode inference_mode;
  auto setup = get_setup(c.shape);
  Setup& s = *setup;
  const InferFn fn = infer_fn(impl);

  // First run of this benchmark: the allocator peak of one call (also the
  // warm-up), whose output is checked: ours against Python's computation,
  // each peer against ours.
  static std::map<std::string, std::pair<double, double>> memory;  // name -> (impl, Python)
  auto& mem = memory[name];
  if (mem.first == 0.0) {
    mha::support::CountingAllocator counter;
    Tensor out;
    mem.first = static_cast<double>(counter.measure_peak_bytes([&] { out = fn(s, c); }));
    std::string error;
    if (impl == "ours") {
      // Python's path once per config (its memory hardly depends on threads).
      static std::map<std::string, std::pair<Tensor, double>> python_runs;
      auto& run = python_runs[config_key(c)];
      if (!run.first.defined()) {
        run.second = static_cast<double>(
            counter.measure_peak_bytes([&] { run.first = run_python_path(s, c); }));
      }
      const Tensor& python = run.first;
      mem.second = run.second;
      error =
          ours_is_native(s, c)
              ? (at::equal(out, python) ? ""
                                        : "ours (native path) not bitwise equal to Python's path")
              : compare(out, python,
                        "ours (fused or head-by-head kernel) differs from Python's path");
    } else {
      error = compare(batch_first(impl, out), ours_output(s, c), impl + " differs from ours");
    }
    if (!error.empty()) {
      mem.first = 0.0;
      any_error = true;
      state.SkipWithError(error.c_str());
      for (auto _ : state) {
      }
      return;
    }
  }

  for (auto _ : state) {
    benchmark::DoNotOptimize(fn(s, c));
  }
  state.counters["flops"] = attention_flops(c.shape, c.causal);
  state.counters["peak_bytes"] = mem.first;
  if (impl == "ours") state.counters["python_path_peak_bytes"] = mem.second;
}

/// One forward + backward step in training mode (dropout 0, so no randomness),
/// no masks, for `impl`. Gradients are reset to none after each step, as
/// `zero_grad()` does. The module is put in train mode; call `.eval()` after.
std::function<void()> make_train_step(Setup& s, const std::string& impl, bool need_weights) {
  const int64_t n = s.shape.batch, l = s.shape.seq_len, e = grid().embed_dim, h = grid().num_heads;
  s.ours->train();
  s.libtorch->train();
  Tensor x = (impl == "libtorch" ? s.x_seq : s.x).detach().clone().requires_grad_(true);
  Tensor cotangent = impl == "libtorch" ? s.cotangent.transpose(0, 1).contiguous() : s.cotangent;
  std::vector<Tensor> params = impl == "libtorch" ? s.libtorch->parameters() : s.ours->parameters();
  return [&s, impl, need_weights, n, l, e, h, x, cotangent, params]() mutable {
    Tensor out;
    if (impl == "ours") {
      out = std::get<0>(s.ours->forward(x, x, x, {}, need_weights));
    } else if (impl == "libtorch") {
      out = std::get<0>(s.libtorch->forward(x, x, x, {}, need_weights));
    } else {
      auto& m = *s.ours;
      const Tensor qkv = at::linear(x, m.in_proj_weight, m.in_proj_bias).view({n, l, 3, h, e / h});
      Tensor o = at::scaled_dot_product_attention(qkv.select(2, 0).transpose(1, 2),
                                                  qkv.select(2, 1).transpose(1, 2),
                                                  qkv.select(2, 2).transpose(1, 2));
      out = at::linear(o.transpose(1, 2).reshape({n, l, e}), m.out_proj->weight, m.out_proj->bias);
    }
    out.backward(cotangent);
    x.mutable_grad().reset();
    for (auto& p : params) p.mutable_grad().reset();
  };
}

/// Forward + backward (`make_train_step`), timed.
void train_benchmark(benchmark::State& state,
                     const std::string& name,
                     const std::string& impl,
                     Shape shape,
                     bool need_weights,
                     int threads) {
  at::set_num_threads(threads);
  auto setup = get_setup(shape);
  Setup& s = *setup;
  auto step = make_train_step(s, impl, need_weights);

  static std::map<std::string, double> memory;
  auto& mem = memory[name];
  if (mem == 0.0) {
    mha::support::CountingAllocator counter;
    mem = static_cast<double>(counter.measure_peak_bytes(step));
  }
  for (auto _ : state) {
    step();
  }
  s.ours->eval();
  s.libtorch->eval();
  // Backward is counted as twice the forward (two GEMMs per forward GEMM).
  state.counters["flops"] = train_flops(shape);
  state.counters["peak_bytes"] = mem;
}

/// The fused path against the native fast path it replaces, through the
/// module, without weights: where the threshold comes from.
void crossover_benchmark(benchmark::State& state, bool fused, InferConfig c) {
  at::set_num_threads(c.threads);
  c10::InferenceMode inference_mode;
  auto setup = get_setup(c.shape);
  Setup& s = *setup;
  const FastPathKernel kernel = fused ? FastPathKernel::kFused : FastPathKernel::kNative;
  benchmark::DoNotOptimize(run_fast_path(s, c, kernel));  // warm-up
  for (auto _ : state) {
    benchmark::DoNotOptimize(run_fast_path(s, c, kernel));
  }
  state.counters["flops"] = attention_flops(c.shape, c.causal);
}

/// The head-by-head kernel against the native op it may replace, with
/// weights: where the weights rule comes from.
void weights_benchmark(benchmark::State& state, bool by_head, bool average, InferConfig c) {
  at::set_num_threads(c.threads);
  c10::InferenceMode inference_mode;
  auto setup = get_setup(c.shape);
  Setup& s = *setup;
  const FastPathKernel kernel = by_head ? FastPathKernel::kByHead : FastPathKernel::kNative;
  const Tensor kpm = c.kpm ? s.kpm : Tensor(), mask = c.causal ? s.causal : Tensor();
  const mha::detail::AttentionCall args{s.x,  s.x,  s.x,     kpm,
                                        mask, true, average, /*is_causal=*/c.causal};
  auto call = [&] {
    return mha::detail::fast_path_forward(kernel, mha::detail::AttentionWeights::of(*s.ours), args);
  };
  benchmark::DoNotOptimize(call());  // warm-up
  for (auto _ : state) {
    benchmark::DoNotOptimize(call());
  }
  state.counters["flops"] = attention_flops(c.shape, c.causal);
  mha::support::CountingAllocator counter;
  state.counters["peak_bytes"] = static_cast<double>(counter.measure_peak_bytes(call));
}

void gemm_benchmark(benchmark::State& state, int threads) {
  at::set_num_threads(threads);
  c10::InferenceMode inference_mode;
  torch::manual_seed(0);
  const Tensor a = torch::randn({grid().gemm_size, grid().gemm_size});
  const Tensor b = torch::randn({grid().gemm_size, grid().gemm_size});
  benchmark::DoNotOptimize(at::mm(a, b));  // warm-up
  for (auto _ : state) {
    benchmark::DoNotOptimize(at::mm(a, b));
  }
  state.counters["flops"] = 2.0 * std::pow(static_cast<double>(grid().gemm_size), 3.0);
}

// ~~~ Registration ~~~

/// --mha_smoke: each inference shape once, with one combination of flags per
/// shape chosen so that the fused path runs plain, causal, padded and both.
struct SmokeFlags {
  bool need_weights, kpm, causal;
};
const std::map<std::string, SmokeFlags> kSmokeFlags = {
    {"1x1", {false, false, false}},   {"1x16", {true, false, false}},
    {"8x16", {false, true, false}},   {"1x128", {true, true, true}},
    {"8x128", {false, false, true}},  {"1x512", {false, true, true}},
    {"8x512", {true, true, false}},   {"1x1024", {false, false, true}},
    {"4x1024", {false, true, false}}, {"1x4096", {false, false, false}}};

void register_all() {
  const std::vector<std::string> impls = {"ours", "seqfirst", "libtorch", "floor"};
  if (flags.smoke) flags.threads.resize(1);
  if (flags.families.count("gemm")) {
    for (int t : flags.threads) {
      auto* b = benchmark::RegisterBenchmark(("gemm/threads:" + std::to_string(t)).c_str(),
                                             [t](benchmark::State& st) { gemm_benchmark(st, t); });
      b->Unit(benchmark::kMicrosecond)->UseRealTime();
      if (flags.smoke) {
        b->Iterations(1)->Repetitions(1);
      } else {
        b->Iterations(3)->Repetitions(5);
      }
    }
  }
  if (flags.families.count("infer")) {
    for (const Shape& shape : grid().infer_shapes) {
      if (!shape_selected(shape)) continue;
      for (int t : flags.threads) {
        for (bool nw : {false, true}) {
          for (bool kpm : {false, true}) {
            for (bool causal : {false, true}) {
              if (flags.smoke) {
                const SmokeFlags& f = kSmokeFlags.at(shape_key(shape));
                if (nw != f.need_weights || kpm != f.kpm || causal != f.causal) continue;
              }
              const InferConfig c{shape, nw, kpm, causal, t};
              for (const auto& impl : impls) {
                if (impl == "seqfirst" && nw) continue;  // the functional steps, as Python's
                const std::string name = "infer/" + impl + shape_str(shape) + flag_str("nw", nw) +
                                         flag_str("kpm", kpm) + flag_str("causal", causal) +
                                         "/threads:" + std::to_string(t);
                auto* b = benchmark::RegisterBenchmark(
                    name.c_str(),
                    [name, impl, c](benchmark::State& st) { infer_benchmark(st, name, impl, c); });
                set_budget(b, attention_flops(shape, causal) * (nw ? 1.5 : 1.0));
              }
            }
          }
        }
      }
    }
  }
  if (flags.families.count("train")) {
    for (const Shape& shape : grid().train_shapes) {
      if (!shape_selected(shape)) continue;
      for (int t : flags.threads) {
        for (bool nw : {false, true}) {
          for (const auto& impl : impls) {
            if (impl == "floor" && nw) continue;  // no composite floor returns weights
            if (flags.smoke && nw) continue;
            const std::string name = "train/" + impl + shape_str(shape) + flag_str("nw", nw) +
                                     "/threads:" + std::to_string(t);
            auto* b = benchmark::RegisterBenchmark(
                name.c_str(), [name, impl, shape, nw, t](benchmark::State& st) {
                  train_benchmark(st, name, impl, shape, nw, t);
                });
            set_budget(b, train_flops(shape));
          }
        }
      }
    }
  }
  if (flags.families.count("weights")) {
    for (const Shape& shape : grid().weights_shapes) {
      if (!shape_selected(shape)) continue;
      if (flags.smoke && shape_key(shape) != "1x256") continue;
      for (int t : flags.threads) {
        for (bool kpm : {false, true}) {
          for (bool causal : {false, true}) {
            for (bool average : {true, false}) {
              if (flags.smoke && (kpm || !causal || !average)) continue;
              for (bool by_head : {false, true}) {
                const InferConfig c{shape, /*need_weights=*/true, kpm, causal, t};
                const std::string name = std::string("weights/") + (by_head ? "byhead" : "native") +
                                         shape_str(shape) + flag_str("kpm", kpm) +
                                         flag_str("causal", causal) + flag_str("avg", average) +
                                         "/threads:" + std::to_string(t);
                auto* b = benchmark::RegisterBenchmark(name.c_str(),
                                                       [by_head, average, c](benchmark::State& st) {
                                                         weights_benchmark(st, by_head, average, c);
                                                       });
                set_budget(b, attention_flops(shape, causal) * 1.5);
              }
            }
          }
        }
      }
    }
  }
  if (flags.families.count("crossover")) {
    for (const Shape& shape : grid().crossover_shapes) {
      if (!shape_selected(shape)) continue;
      if (flags.smoke && shape_key(shape) != "1x256") continue;
      for (int t : flags.threads) {
        for (bool kpm : {false, true}) {
          for (bool causal : {false, true}) {
            if (flags.smoke && (kpm || causal)) continue;
            for (bool fused : {false, true}) {
              const InferConfig c{shape, /*need_weights=*/false, kpm, causal, t};
              const std::string name = std::string("crossover/") + (fused ? "fused" : "native") +
                                       shape_str(shape) + flag_str("kpm", kpm) +
                                       flag_str("causal", causal) + "/threads:" + std::to_string(t);
              auto* b = benchmark::RegisterBenchmark(
                  name.c_str(),
                  [fused, c](benchmark::State& st) { crossover_benchmark(st, fused, c); });
              set_budget(b, attention_flops(shape, causal));
            }
          }
        }
      }
    }
  }
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, sep)) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

/// Takes our --mha_* flags out of argv; the rest goes to Google Benchmark.
void parse_flags(int* argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* prefix) -> const char* {
      const size_t n = std::strlen(prefix);
      return arg.compare(0, n, prefix) == 0 ? argv[i] + n : nullptr;
    };
    if (arg == "--mha_smoke") {
      flags.smoke = true;
    } else if (const char* v = value("--mha_shapes=")) {
      for (const auto& s : split(v, ',')) flags.shapes.insert(s);
    } else if (const char* v = value("--mha_threads=")) {
      flags.threads.clear();
      for (const auto& s : split(v, ',')) flags.threads.push_back(std::stoi(s));
    } else if (const char* v = value("--mha_profile=")) {
      flags.profile = v;
    } else if (const char* v = value("--mha_profile_train=")) {
      flags.profile_train = v;
    } else if (const char* v = value("--mha_min_length=")) {
      flags.min_length = std::stoll(v);
    } else if (const char* v = value("--mha_families=")) {
      flags.families.clear();
      for (const auto& s : split(v, ',')) flags.families.insert(s);
    } else {
      argv[kept++] = argv[i];
    }
  }
  *argc = kept;
}

// ~~~ Op profiles (--mha_profile) ~~~

/// Self time per ATen op over `iterations` calls of `fn`, on the calling
/// thread (where every op is recorded), printed as a table.
void print_profile(const std::string& title, const std::function<void()>& fn, int iterations) {
  namespace prof = torch::profiler::impl;
  namespace ap = torch::autograd::profiler;
  fn();  // warm-up
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
  const std::set<prof::ActivityType> activities = {prof::ActivityType::CPU};
  ap::prepareProfiler(config, activities);
  ap::enableProfiler(config, activities);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) fn();
  const double wall_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      iterations;
  const auto result = ap::disableProfiler();

  struct Span {
    std::string name;
    uint64_t start, end;
  };
  std::vector<Span> spans;
  for (const auto& e : result->events()) {
    if (e.durationNs() == 0 || e.name().rfind("aten::", 0) != 0) continue;
    spans.push_back({e.name(), e.startNs(), e.endNs()});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  // Self time: an op's duration less its nested ops'.
  std::map<std::string, std::pair<double, int>> self;  // name -> (ns, calls)
  std::vector<size_t> stack;
  std::vector<double> child(spans.size(), 0.0);
  auto close = [&](size_t i) {
    auto& entry = self[spans[i].name];
    entry.first += static_cast<double>(spans[i].end - spans[i].start) - child[i];
    entry.second += 1;
  };
  for (size_t i = 0; i < spans.size(); ++i) {
    while (!stack.empty() && spans[stack.back()].end <= spans[i].start) {
      close(stack.back());
      stack.pop_back();
    }
    if (!stack.empty()) child[stack.back()] += static_cast<double>(spans[i].end - spans[i].start);
    stack.push_back(i);
  }
  while (!stack.empty()) {
    close(stack.back());
    stack.pop_back();
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(self.begin(), self.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  double total = 0.0;
  for (const auto& r : rows) total += r.second.first;
  std::printf("\n%s: %.0f us per call (wall), %.0f us in ATen ops\n", title.c_str(), wall_us,
              total / 1e3 / iterations);
  std::printf("  %-46s %8s %12s %7s\n", "op (self time)", "calls", "us per call", "share");
  for (const auto& r : rows) {
    const double us = r.second.first / 1e3 / iterations;
    if (us < 0.005 * total / 1e3 / iterations) continue;
    std::printf("  %-46s %8.1f %12.1f %6.1f%%\n", r.first.c_str(),
                static_cast<double>(r.second.second) / iterations, us,
                100.0 * r.second.first / total);
  }
}

/// --mha_profile_train=N,L,nw,threads: forward + backward profiles.
int run_train_profiles(const std::string& spec) {
  const auto v = split(spec, ',');
  if (v.size() != 4) {
    std::fprintf(stderr, "--mha_profile_train wants N,L,nw,threads, got '%s'\n", spec.c_str());
    return 2;
  }
  const Shape shape{std::stoll(v[0]), std::stoll(v[1])};
  const bool need_weights = v[2] == "1";
  at::set_num_threads(std::stoi(v[3]));
  auto setup = get_setup(shape);
  const int iterations =
      std::max(1, std::min(20, static_cast<int>(0.5 / (train_flops(shape) / 4e10))));
  std::printf("train profile: N=%ld L=%ld need_weights=%d threads=%s, %d steps each\n",
              static_cast<long>(shape.batch), static_cast<long>(shape.seq_len), need_weights,
              v[3].c_str(), iterations);
  for (const std::string impl : {"ours", "libtorch", "floor"}) {
    if (impl == "floor" && need_weights) continue;
    print_profile(impl + " (forward + backward)", make_train_step(*setup, impl, need_weights),
                  iterations);
  }
  return 0;
}

int run_profiles(const std::string& spec) {
  const auto v = split(spec, ',');
  if (v.size() != 6) {
    std::fprintf(stderr, "--mha_profile wants N,L,nw,kpm,causal,threads, got '%s'\n", spec.c_str());
    return 2;
  }
  const InferConfig c{
      {std::stoll(v[0]), std::stoll(v[1])}, v[2] == "1", v[3] == "1", v[4] == "1", std::stoi(v[5])};
  at::set_num_threads(c.threads);
  c10::InferenceMode inference_mode;
  auto setup = get_setup(c.shape);
  Setup& s = *setup;
  const double seconds = attention_flops(c.shape, c.causal) / 4e10;
  const int iterations = std::max(1, std::min(50, static_cast<int>(1.0 / seconds)));
  std::printf("profile: N=%ld L=%ld need_weights=%d kpm=%d causal=%d threads=%d, %d calls each\n",
              static_cast<long>(c.shape.batch), static_cast<long>(c.shape.seq_len), c.need_weights,
              c.kpm, c.causal, c.threads, iterations);
  print_profile("ours", [&] { run_ours(s, c); }, iterations);
  print_profile(
      "Python's path (the ATen ops of nn.MultiheadAttention)", [&] { run_python_path(s, c); },
      iterations);
  print_profile("LibTorch", [&] { run_libtorch(s, c); }, iterations);
  print_profile("floor", [&] { run_floor(s, c); }, iterations);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  parse_flags(&argc, argv);
  if (!flags.profile.empty()) return run_profiles(flags.profile);
  if (!flags.profile_train.empty()) return run_train_profiles(flags.profile_train);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("torch", std::to_string(TORCH_VERSION_MAJOR) + "." +
                                           std::to_string(TORCH_VERSION_MINOR) + "." +
                                           std::to_string(TORCH_VERSION_PATCH));
  benchmark::AddCustomContext("embed_dim", std::to_string(grid().embed_dim));
  benchmark::AddCustomContext("num_heads", std::to_string(grid().num_heads));
  benchmark::AddCustomContext(
      "fused_min_length",
      std::to_string(flags.min_length > 0 ? flags.min_length : mha::detail::kFusedMinLength));
  benchmark::AddCustomContext("by_head_min_length", std::to_string(mha::detail::kByHeadMinLength));
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (any_error) {
    std::fprintf(stderr,
                 "mha_bench: some outputs differ beyond tolerance (see the errors above)\n");
    return 1;
  }
  return 0;
}
