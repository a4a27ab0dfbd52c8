// The panel GEMM's entry: the layout's conversions, the operands checked, the
// capability chosen from this CPU's features, the work split over threads.

#include "linear/panel_gemm/panel_gemm.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <vector>

#include "common/calling_thread.h"
#include "common/parallel_items.h"
#include "common/reused_buffers.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

/// Bytes of a row block's inputs: up to a core's L2 (2 MB and more), where they stay
/// while the block's panel groups stream by.
constexpr int64_t kBlockBytes = int64_t{2} << 20;

/// Runs of (row block, panel group) pairs per thread, at most: enough that a
/// thread that wakes late takes fewer.
constexpr int64_t kChunksPerThread = 8;

/// (Row block, panel group) pairs per run, at least, where there are enough:
/// a run's groups prefetch one another, and runs of one group prefetch none.
/// At 48 rows on 2 threads, weights streamed from memory, a GEMM of 8-32
/// groups took 1.37-1.63x less time than on one thread in runs of one group,
/// 1.66-1.87x in runs of at least 8 (AVX2 EPYC; 1.9x for 125 groups either way).
constexpr int64_t kGroupsPerRun = 8;

/// Throws unless x (M, in), panels (P, in, 16) and bias (out) fit together.
void check_operands(const Tensor& x, const Tensor& panels, int64_t out, const Tensor& bias) {
  TORCH_CHECK(panels.dim() == 3 && panels.size(2) == kPanelWidth && panels.is_contiguous() &&
                  panels.scalar_type() == at::kFloat && panels.device().is_cpu(),
              "panel GEMM: expected contiguous float32 CPU panels (P, in, 16), but got ",
              panels.sizes(), " of ", panels.scalar_type());
  TORCH_CHECK(out > (panels.size(0) - 1) * kPanelWidth && out <= panels.size(0) * kPanelWidth,
              "panel GEMM: expected ", panels.size(0), " panels to hold ", out, " output features");
  TORCH_CHECK(x.dim() == 2 && x.size(1) == panels.size(1) && x.scalar_type() == at::kFloat &&
                  x.device().is_cpu(),
              "mat1 and mat2 shapes cannot be multiplied (", x.dim() == 2 ? x.size(0) : 0, "x",
              x.dim() == 2 ? x.size(1) : 0, " and ", panels.size(1), "x", out, ")");
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == out &&
                                  bias.scalar_type() == at::kFloat && bias.device().is_cpu()),
              "panel GEMM: expected a float32 CPU bias of ", out, " features, but got ",
              bias.sizes());
}

/// `kernel` over every (row block, panel group) pair of `args`, the pairs
/// claimed by the threads in turn in up to kChunksPerThread runs per thread of
/// at least kGroupsPerRun pairs where there are enough, a block's groups next
/// to each other: blocks of equal rows, as few as keep each block's inputs
/// within kBlockBytes.
void run_in_blocks(void (*kernel)(const PanelGemmArgs&, int64_t, int64_t),
                   const PanelGemmArgs& args,
                   int64_t groups) {
  const int64_t most_rows = std::max<int64_t>(kBlockBytes / (args.in * 4), 1);
  const int64_t blocks = (args.rows + most_rows - 1) / most_rows;
  const int64_t block_rows = (args.rows + blocks - 1) / blocks;
  const int64_t width = args.panel_count * kPanelWidth;
  const auto run_items = [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end;) {
      const int64_t block = item / groups, group = item % groups;
      const int64_t last = std::min(end, (block + 1) * groups);  // this block's groups
      PanelGemmArgs rows_of_block = args;
      rows_of_block.x += block * block_rows * args.in;
      rows_of_block.y += block * block_rows * width;
      rows_of_block.rows = std::min(block_rows, args.rows - block * block_rows);
      kernel(rows_of_block, group, group + last - item);
      item = last;
    }
  };
  const int64_t items = blocks * groups;
  const int64_t runs_per_thread = std::clamp<int64_t>(
      items / (std::max(at::get_num_threads(), 1) * kGroupsPerRun), 1, kChunksPerThread);
  parallel_items(items, run_items, runs_per_thread);
}

}  // namespace

Tensor to_panels(const Tensor& weight) {
  const int64_t out = weight.size(0), in = weight.size(1);
  const int64_t panels = (out + kPanelWidth - 1) / kPanelWidth;
  const Tensor padded = at::constant_pad_nd(weight, {0, 0, 0, panels * kPanelWidth - out});
  return padded.view({panels, kPanelWidth, in}).transpose(1, 2).contiguous();  // (P, in, 16)
}

Tensor from_panels(const Tensor& panels, int64_t out) {
  const Tensor rows = panels.transpose(1, 2).reshape({-1, panels.size(1)});  // (P * 16, in)
  return rows.narrow(0, 0, out).contiguous();                                // (out, in)
}

const char* panel_gemm_compiled_for(CpuCapability capability) {
  return MHA_CAPABILITY_ENTRY(capability, panel_gemm, _compiled_for)();
}

Tensor panel_gemm(const Tensor& x,
                  const Tensor& panels,
                  int64_t out,
                  const Tensor& bias,
                  FusedActivation activation,
                  CpuCapability capability) {
  TORCH_CHECK_VALUE(cpu_runs(capability), "panel GEMM: this build or CPU has no ",
                    capability_name(capability), " kernel");
  RECORD_FUNCTION("mha::panel_gemm", std::vector<c10::IValue>());
  check_operands(x, panels, out, bias);
  const int64_t count = panels.size(0), width = count * kPanelWidth;
  const Tensor rows = x.contiguous();  // (M, in)
  // (width): the bias padded to whole panels
  const Tensor padded_bias = !bias.defined() || width == out
                                 ? bias.contiguous()
                                 : at::constant_pad_nd(bias, {0, width - out});
  Tensor y = empty_reused({rows.size(0), width}, x.options());  // (M, P * 16)
  const PanelGemmArgs args{rows.data_ptr<float>(),
                           panels.data_ptr<float>(),
                           padded_bias.defined() ? padded_bias.data_ptr<float>() : nullptr,
                           y.data_ptr<float>(),
                           rows.size(0),
                           rows.size(1),
                           count,
                           activation};
  const auto kernel = MHA_CAPABILITY_ENTRY(capability, panel_gemm, );
  const int64_t groups = (count + kPanelGroup - 1) / kPanelGroup;
  if (args.rows * args.in * width < kCallingThreadMultiplyAdds) {
    kernel(args, 0, groups);
  } else {
    run_in_blocks(kernel, args, groups);
  }
  return width == out ? y : y.narrow(1, 0, out).contiguous();  // (M, out)
}

Tensor panel_gemm(const Tensor& x,
                  const Tensor& panels,
                  int64_t out,
                  const Tensor& bias,
                  FusedActivation activation) {
  return panel_gemm(x, panels, out, bias, activation, best_cpu_capability());
}

}  // namespace detail
}  // namespace mha
