// decode_step_profile: where the time of one cached decoder step goes. The
// decoder of transformer_decode_bench (6 layers, d_model 512, nhead 8,
// dim_feedforward 2048, a (1000, 512) tied output projection), after a
// 32-token prompt against 64 memory positions; for N = 1 and 8 and 1 and 2
// threads, printed as one table:
//   step_ms      the median of 64 single-position steps (forward_cached and
//                the argmax over the output projection)
//   tiny_ms      the same steps of a decoder of the same structure with
//                d_model 16, nhead 8, dim_feedforward 16: about the same ATen
//                ops on tiny tensors, so the dispatcher, allocator and
//                per-op floor
//   ops          ATen ops per step (RecordFunction)
//   weight_GBps  the bytes of the weights a step reads (the decoder's, without
//                the cross-attention key/value rows, which only the first step
//                uses, plus the output projection) over step_ms
//   sweep_GBps   a read-only sweep (sum) over a float buffer of that size,
//                same threads, same run; weight_GBps / sweep_GBps is the
//                share of the reachable bandwidth
// --competitor: one CPU-bound process runs beside the whole measurement.
// --prepack: the decoder's weights prepacked by mha::prepack (a server's
// choice; without it every GEMM is at::linear on the float weights).
// --int8: the decoder quantized by mha::quantize_dynamic (the tied output
// projection stays float32), weights counted as their int8 bytes; then, per
// N and threads, the top-level ATen ops of one step by total time.

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <mha/prepack.h>
#include <mha/quantization.h>
#include <mha/state_dict.h>
#include <mha/transformer.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

using torch::Tensor;

constexpr int64_t kLayers = 6, kVocab = 1000, kMemory = 64, kPrompt = 32, kSteps = 64;

/// A greedy decoder of width `d_model` (nhead 8) at batch `n`, prompt decoded.
struct Decoder {
  mha::TransformerDecoder decoder{nullptr};
  Tensor embedding, memory, newest;
  std::optional<mha::TransformerDecoderCache> cache;  // made with the decoder

  /// `form`: "float", "prepack" or "int8".
  Decoder(int64_t d_model, int64_t feed_forward, int64_t n, const std::string& form) {
    torch::manual_seed(0);
    decoder = mha::TransformerDecoder(mha::TransformerDecoderOptions(
        mha::TransformerDecoderLayer(mha::TransformerDecoderLayerOptions(d_model, 8)
                                         .dim_feedforward(feed_forward)
                                         .batch_first(true)),
        kLayers));
    decoder->eval();
    if (form == "prepack") mha::prepack(decoder);
    if (form == "int8") mha::quantize_dynamic(decoder);
    embedding = torch::randn({kVocab, d_model});
    memory = torch::randn({n, kMemory, d_model});
    cache.emplace(decoder->make_cache(kPrompt + kSteps + 8));
    newest = torch::randint(kVocab, {n, kPrompt});
    const c10::InferenceMode inference;
    step(memory);
  }

  /// One call: the newest positions through the decoder, the next tokens (N, 1).
  void step(const Tensor& new_memory = {}) {
    const Tensor out =
        decoder->forward_cached(at::embedding(embedding, newest), new_memory, *cache);
    newest = at::linear(out.select(1, -1), embedding).argmax(-1, /*keepdim=*/true);
  }

  /// Bytes of the weights one single-position step reads (int8 weights as
  /// their int8 bytes): all but two thirds of the cross-attention's in_proj.
  int64_t weight_bytes_per_step() const {
    int64_t bytes = embedding.nbytes();
    for (const auto& [name, tensor] : mha::state_dict(*decoder)) {
      const bool cross_in_proj = name.find("multihead_attn.in_proj_") != std::string::npos;
      bytes += cross_in_proj ? tensor.nbytes() / 3 : tensor.nbytes();
    }
    return bytes;
  }
};

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

/// The median time of `kSteps` steps of `d`.
double median_step_ms(Decoder& d) {
  std::vector<double> times;
  for (int64_t i = 0; i < kSteps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    d.step();
    times.push_back(ms_since(start));
  }
  return median(times);
}

std::atomic<int64_t> ops_seen{0};

/// ATen ops in one step of `d`.
int64_t ops_per_step(Decoder& d) {
  ops_seen = 0;
  const auto handle = at::addThreadLocalCallback(at::RecordFunctionCallback(
      [](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
        ++ops_seen;
        return nullptr;
      }));
  d.step();
  at::removeCallback(handle);
  return ops_seen.load();
}

/// GB/s of a read-only sweep (sum) over `bytes` of float32.
double sweep_gbps(int64_t bytes) {
  const Tensor buffer = torch::rand({bytes / 4});
  std::vector<double> times;
  for (int i = 0; i < 21; ++i) {
    const auto start = std::chrono::steady_clock::now();
    buffer.sum().item<float>();
    times.push_back(ms_since(start));
  }
  return static_cast<double>(bytes) / median(times) / 1e6;
}

/// Total ms and calls per top-level ATen op name over one step of `d`
/// (nested ops are in their caller's), most time first.
std::vector<std::tuple<double, std::string, int64_t>> op_times(Decoder& d) {
  struct Timing {
    std::map<std::string, double> ms;
    std::map<std::string, int64_t> calls;
    std::vector<std::chrono::steady_clock::time_point> starts;
  };
  static thread_local Timing* timing = nullptr;
  Timing t;
  timing = &t;
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(
          [](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
            timing->starts.push_back(std::chrono::steady_clock::now());
            return nullptr;
          },
          [](const at::RecordFunction& fn, at::ObserverContext*) {
            const double ms = ms_since(timing->starts.back());
            timing->starts.pop_back();
            if (timing->starts.empty()) {
              timing->ms[fn.name()] += ms;
              ++timing->calls[fn.name()];
            }
          })
          .scopes({at::RecordScope::FUNCTION}));
  d.step();
  at::removeCallback(handle);
  timing = nullptr;
  std::vector<std::tuple<double, std::string, int64_t>> sorted;
  for (const auto& [name, ms] : t.ms) sorted.emplace_back(ms, name, t.calls[name]);
  std::sort(sorted.rbegin(), sorted.rend());
  return sorted;
}

void print_top_ops(Decoder& d, int64_t n, int threads) {
  const auto ops = op_times(d);
  std::printf("  N = %ld, %d thread(s), top-level ops by time (calls):", static_cast<long>(n),
              threads);
  for (size_t i = 0; i < std::min<size_t>(12, ops.size()); ++i) {
    const auto& [ms, name, calls] = ops[i];
    std::printf(" %s %.3f ms (%ld);", name.c_str(), ms, static_cast<long>(calls));
  }
  std::printf("\n");
}

void profile(int64_t n, int threads, const std::string& form) {
  at::set_num_threads(threads);
  Decoder real(512, 2048, n, form), tiny(16, 16, n, form);
  const c10::InferenceMode inference;
  real.step();
  tiny.step();  // warm: packed weights, allocator
  const double step_ms = median_step_ms(real), tiny_ms = median_step_ms(tiny);
  const int64_t ops = ops_per_step(real), tiny_ops = ops_per_step(tiny);
  const int64_t bytes = real.weight_bytes_per_step();
  const double weight_gbps = static_cast<double>(bytes) / step_ms / 1e6;
  const double sweep = sweep_gbps(bytes);
  std::printf("| %ld | %d | %.3f | %.3f (%.0f%%) | %ld / %ld | %.1f MB | %.2f | %.2f | %.0f%% |\n",
              static_cast<long>(n), threads, step_ms, tiny_ms, 100.0 * tiny_ms / step_ms,
              static_cast<long>(ops), static_cast<long>(tiny_ops), bytes / 1e6, weight_gbps, sweep,
              100.0 * weight_gbps / sweep);
  if (form == "int8") print_top_ops(real, n, threads);
  std::fflush(stdout);
}

/// A CPU-bound child process (killed by the returned pid's owner).
pid_t start_competitor() {
  const pid_t pid = fork();
  if (pid == 0) {
    volatile uint64_t x = 0;
    for (;;) x = x + 1;
  }
  return pid;
}

}  // namespace

int main(int argc, char** argv) {
  bool competitor = false;
  std::string form = "float";
  for (int i = 1; i < argc; ++i) {
    competitor = competitor || std::strcmp(argv[i], "--competitor") == 0;
    if (std::strcmp(argv[i], "--int8") == 0) form = "int8";
    if (std::strcmp(argv[i], "--prepack") == 0) form = "prepack";
  }
  const pid_t child = competitor ? start_competitor() : 0;
  std::printf("decode_step_profile, %s%s (OMP_WAIT_POLICY=%s)\n\n", form.c_str(),
              competitor ? ", one CPU-bound process beside it" : "",
              std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "unset");
  std::printf(
      "| N | threads | step ms | d_model 16 step ms (share) | ops (512 / 16) | weights per step "
      "| weight GB/s | sweep GB/s | share of sweep |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const int threads : {1, 2}) {
    for (const int64_t n : {1, 8}) profile(n, threads, form);
  }
  if (child > 0) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  return 0;
}
