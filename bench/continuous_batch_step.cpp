// decode_step_profile --continuous-batch (continuous_batch_step.h): an
// mha::Transformer (6 + 6 layers, d_model 512, nhead 8, dim_feedforward 2048,
// seeded weights, a (1000, 512) tied embedding and output projection) serves
// N requests through one mha::ContinuousBatch over its decoder. Each request's
// source (16-128 tokens, fixed seed) is encoded alone and admitted; then
// every step runs one new token of every request: the embedding, the batch's
// step, the output projection (one GEMM over all requests) and the argmax.
// Measured per step:
//   step ms        the median of kSteps steps, after kWarmSteps
//   ops            ATen ops (RecordFunction, nested ones included)
//   profiled ms    the mean wall time of kProfiledSteps steps timed op by op
//                  (RecordFunction callbacks, which add their own time)
//   GEMM           top-level linear, addmm, mm, matmul, bmm and the packed
//                  and int8 linear ops, as a share of the profiled steps' wall
//                  time
//   attention      top-level scaled_dot_product_attention (one call per
//                  request and layer in a per-sequence attention) and the
//                  decode kernel, mha::paged_decode_attention (one call per
//                  layer's attention and step)
//   other ops      every other top-level op (gathers, norms, copies, ...)
//   outside ops    the profiled step's wall time that no top-level op covers

#include "continuous_batch_step.h"

#include <ATen/Parallel.h>
#include <mha/batching.h>
#include <mha/prepack.h>
#include <mha/quantization.h>
#include <mha/transformer.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "step_timing.h"

namespace continuous_batch_step {

namespace {

using step_timing::ms_since;
using torch::Tensor;

constexpr int64_t kLayers = 6, kModel = 512, kHeads = 8, kFeedForward = 2048, kVocab = 1000;
constexpr int64_t kMinSource = 16, kMaxSource = 128, kBlockSize = 16;
constexpr int64_t kWarmSteps = 4, kSteps = 64, kProfiledSteps = 8;

int64_t blocks_for(int64_t positions) { return (positions + kBlockSize - 1) / kBlockSize; }

/// N requests admitted to a ContinuousBatch over a seeded Transformer's decoder.
struct Server {
  mha::Transformer model{nullptr};
  Tensor embedding;  // (kVocab, E): the tokens' embedding and the output projection
  std::unique_ptr<mha::ContinuousBatch> batch;
  std::map<int64_t, Tensor> newest;  // request id -> its newest token (1)

  Server(int64_t n, const std::string& form) {
    torch::manual_seed(0);
    model = mha::Transformer(mha::TransformerOptions(kModel, kHeads, kLayers, kLayers)
                                 .dim_feedforward(kFeedForward)
                                 .dropout(0.0));
    model->eval();
    if (form == "prepack") mha::prepack(model);
    if (form == "int8") mha::quantize_dynamic(model);
    embedding = torch::randn({kVocab, kModel});
    const int64_t positions = kWarmSteps + kSteps + 1 + kProfiledSteps;  // every step run
    batch = std::make_unique<mha::ContinuousBatch>(
        mha::TransformerDecoder(model->decoder.ptr<mha::TransformerDecoderImpl>()),
        mha::ContinuousBatchOptions()
            .block_size(kBlockSize)
            .num_blocks(n * blocks_for(positions))
            .num_memory_blocks(n * blocks_for(kMaxSource)));
    const c10::InferenceMode inference;
    std::mt19937 random(1234);
    std::uniform_int_distribution<int64_t> length(kMinSource, kMaxSource);
    for (int64_t i = 0; i < n; ++i) {
      const Tensor src = torch::randint(kVocab, {length(random)});                      // (S)
      const Tensor memory = model->encode(at::embedding(embedding, src).unsqueeze(1));  // (S, 1, E)
      newest[batch->add(memory.squeeze(1))] = src.narrow(0, 0, 1);  // any first token: (1)
    }
  }

  /// One token of every request: embedded, stepped, projected (one GEMM for
  /// all requests), argmax.
  void step() {
    std::map<int64_t, Tensor> inputs;
    for (const auto& [id, token] : newest) inputs[id] = at::embedding(embedding, token);  // (1, E)
    const auto outputs = batch->step(inputs);
    std::vector<Tensor> rows;
    for (const auto& [id, out] : outputs) rows.push_back(out);
    const Tensor tokens = at::linear(at::cat(rows), embedding).argmax(-1);  // (N, vocab) -> (N)
    int64_t i = 0;
    for (const auto& [id, out] : outputs) newest[id] = tokens.narrow(0, i++, 1);  // (1)
  }
};

/// Whether top-level op `name` is a GEMM.
bool is_gemm(const std::string& name) {
  static const std::set<std::string> gemms{"aten::linear",
                                           "aten::addmm",
                                           "aten::mm",
                                           "aten::matmul",
                                           "aten::bmm",
                                           "aten::baddbmm",
                                           "mkldnn::_linear_pointwise",
                                           "quantized::linear_dynamic"};
  return gemms.count(name) > 0;
}

/// One N's measurements.
struct Row {
  int64_t n = 0, ops = 0;
  double step_ms = 0, profiled_ms = 0, gemm_ms = 0, sdpa_ms = 0, other_ms = 0;
  std::string top;  // the top-level ops by time, with their calls
};

/// `kProfiledSteps` steps of `server` timed op by op: the profiled fields of
/// `row`, per step.
void profile_steps(Server& server, Row& row) {
  std::map<std::string, step_timing::OpTime> total;  // by op name, over the steps
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < kProfiledSteps; ++i) {
    for (const auto& op : step_timing::top_level_op_times([&] { server.step(); })) {
      auto& sum = total.try_emplace(op.name, step_timing::OpTime{0, op.name, 0}).first->second;
      sum.ms += op.ms / kProfiledSteps;
      sum.calls += op.calls;
    }
  }
  row.profiled_ms = ms_since(start) / kProfiledSteps;
  std::vector<step_timing::OpTime> ops;
  for (const auto& [name, op] : total) ops.push_back(op);
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.ms > b.ms; });
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    const bool sdpa =
        op.name == "aten::scaled_dot_product_attention" || op.name == "mha::paged_decode_attention";
    (is_gemm(op.name) ? row.gemm_ms : sdpa ? row.sdpa_ms : row.other_ms) += op.ms;
    if (i < 10) {
      row.top += " " + op.name + " " + std::to_string(op.ms).substr(0, 6) + " ms (" +
                 std::to_string(op.calls / kProfiledSteps) + ");";
    }
  }
}

/// N requests' steps at `threads` threads.
Row measure(int64_t n, int threads, const std::string& form) {
  at::set_num_threads(threads);
  Server server(n, form);
  const c10::InferenceMode inference;
  for (int64_t i = 0; i < kWarmSteps; ++i) server.step();
  std::vector<double> times;
  for (int64_t i = 0; i < kSteps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    server.step();
    times.push_back(ms_since(start));
  }
  Row row;
  row.n = n;
  row.step_ms = step_timing::median(times);
  row.ops = step_timing::ops_in([&] { server.step(); });
  profile_steps(server, row);
  return row;
}

}  // namespace

void profile(const std::vector<int64_t>& counts, int threads, const std::string& form) {
  std::vector<Row> rows;
  for (const int64_t n : counts) rows.push_back(measure(n, threads, form));
  std::printf(
      "| N | threads | step ms (median of %ld) | ms per request | ATen ops per step | profiled "
      "ms | GEMM | attention | other ops | outside ops "
      "|\n|---|---|---|---|---|---|---|---|---|---|\n",
      static_cast<long>(kSteps));
  for (const Row& r : rows) {
    const double wall = r.profiled_ms, outside = wall - r.gemm_ms - r.sdpa_ms - r.other_ms;
    std::printf("| %ld | %d | %.2f | %.3f | %ld | %.1f | %.0f%% | %.0f%% | %.0f%% | %.0f%% |\n",
                static_cast<long>(r.n), threads, r.step_ms, r.step_ms / static_cast<double>(r.n),
                static_cast<long>(r.ops), wall, 100 * r.gemm_ms / wall, 100 * r.sdpa_ms / wall,
                100 * r.other_ms / wall, 100 * outside / wall);
  }
  std::printf("\nTop-level ops by time per profiled step (calls per step):\n");
  for (const Row& r : rows) std::printf("- N = %ld:%s\n", static_cast<long>(r.n), r.top.c_str());
  std::fflush(stdout);
}

}  // namespace continuous_batch_step
