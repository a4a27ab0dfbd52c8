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
// --hf DIR: instead, one greedy step of the Hugging Face seq2seq model in DIR
// as load_hf_model gives it (prepacked; with --float, prepack(false); with
// --onednn, decoder_panels(false)), N = 1 and 16, 1 and 2 threads
// (hf_decode_step.cpp). With --generate, whole mha::generate calls instead
// (greedy and 4 beams, 64 tokens), timed and split by top-level op.
// --continuous-batch N[,N...]: instead, one step of an mha::ContinuousBatch
// serving N requests of a 6 + 6-layer seq2seq Transformer, one token each
// (continuous_batch_step.cpp), at --threads T (default 1); --prepack and
// --int8 apply to it too.

#include <ATen/Parallel.h>
#include <mha/prepack.h>
#include <mha/quantization.h>
#include <mha/state_dict.h>
#include <mha/transformer.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "continuous_batch_step.h"
#include "hf_decode_step.h"
#include "step_timing.h"

namespace {

using step_timing::median;
using step_timing::ms_since;
using step_timing::ops_in;
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

/// ATen ops in one step of `d`.
int64_t ops_per_step(Decoder& d) {
  return ops_in([&] { d.step(); });
}

void print_top_ops(Decoder& d, int64_t n, int threads) {
  step_timing::print_top_level_ops(
      "N = " + std::to_string(n) + ", " + std::to_string(threads) + " thread(s),",
      [&] { d.step(); }, 12);
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
  const double sweep = step_timing::sweep_gbps(bytes);
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

/// "1,8,48" -> {1, 8, 48}.
std::vector<int64_t> parse_counts(const std::string& list) {
  std::vector<int64_t> counts;
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    counts.push_back(std::stoll(list.substr(start, comma - start)));
    TORCH_CHECK(counts.back() > 0, "--continuous-batch: expected request counts > 0, but got ",
                counts.back());
    start = comma + 1;
  }
  return counts;
}

}  // namespace

int main(int argc, char** argv) {
  bool competitor = false;
  std::string form = "float";
  std::vector<int64_t> counts;      // --continuous-batch
  std::string hf_directory;         // --hf
  std::string hf_form = "prepack";  // --hf with --float or --onednn
  bool hf_generate = false;         // --hf with --generate
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    competitor = competitor || std::strcmp(argv[i], "--competitor") == 0;
    if (std::strcmp(argv[i], "--int8") == 0) form = "int8";
    if (std::strcmp(argv[i], "--prepack") == 0) form = "prepack";
    if (std::strcmp(argv[i], "--continuous-batch") == 0 && i + 1 < argc) {
      counts = parse_counts(argv[++i]);
    }
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = std::stoi(argv[++i]);
    if (std::strcmp(argv[i], "--hf") == 0 && i + 1 < argc) hf_directory = argv[++i];
    if (std::strcmp(argv[i], "--float") == 0) hf_form = "float";
    if (std::strcmp(argv[i], "--onednn") == 0) hf_form = "onednn";
    hf_generate = hf_generate || std::strcmp(argv[i], "--generate") == 0;
  }
  if (!hf_directory.empty()) {
    if (hf_generate) {
      hf_decode_step::profile_generate(hf_directory);
    } else {
      hf_decode_step::profile(hf_directory, hf_form);
    }
    return 0;
  }
  const pid_t child = competitor ? start_competitor() : 0;
  std::printf("decode_step_profile%s, %s%s (OMP_WAIT_POLICY=%s)\n\n",
              counts.empty() ? "" : " --continuous-batch", form.c_str(),
              competitor ? ", one CPU-bound process beside it" : "",
              std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "unset");
  if (!counts.empty()) {
    continuous_batch_step::profile(counts, threads, form);
  } else {
    std::printf(
        "| N | threads | step ms | d_model 16 step ms (share) | ops (512 / 16) | weights per "
        "step | weight GB/s | sweep GB/s | share of sweep "
        "|\n|---|---|---|---|---|---|---|---|---|\n");
    for (const int t : {1, 2}) {
      for (const int64_t n : {1, 8}) profile(n, t, form);
    }
  }
  if (child > 0) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  return 0;
}
