// The initial values of a rank's shard (shard_init.h): Python's init functions
// (torch/nn/init.py: xavier_uniform_, xavier_normal_, kaiming_uniform_) with the
// whole tensors' fans, drawn for the shard alone or, exactly, for the whole
// tensor a block of rows at a time.

#include "tensor_parallel/shard_init.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <c10/util/accumulate.h>
#include <torch/nn/init.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <mutex>
#include <utility>

namespace mha {
namespace detail {
namespace {

using torch::Tensor;

/// Elements of one block of rows drawn at a time by the exact init.
constexpr int64_t kBlockElements = int64_t{1} << 18;

/// Python's `_calculate_fan_in_and_fan_out` of a tensor of sizes `whole`.
std::pair<int64_t, int64_t> fans(c10::IntArrayRef whole) {
  int64_t receptive_field = 1;
  for (size_t d = 2; d < whole.size(); ++d) receptive_field *= whole[d];
  return {whole[1] * receptive_field, whole[0] * receptive_field};
}

/// A tensor's distribution: uniform(-scale, scale) or normal(0, scale).
struct Draw {
  bool normal;
  double scale;
};

Draw xavier(c10::IntArrayRef whole, bool normal) {
  const auto [fan_in, fan_out] = fans(whole);
  const double std = std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));  // gain 1
  return {normal, normal ? std : std::sqrt(3.0) * std};
}

/// Linear.reset_parameters: kaiming_uniform_(weight, a=sqrt(5)).
Draw linear_weight(c10::IntArrayRef whole) {
  const double gain = torch::nn::init::calculate_gain(torch::kLeakyReLU, std::sqrt(5.0));
  const double std = gain / std::sqrt(static_cast<double>(fans(whole).first));
  return {false, std::sqrt(3.0) * std};
}

/// Linear.reset_parameters: uniform_(bias, -1/sqrt(fan_in), 1/sqrt(fan_in)).
Draw linear_bias(int64_t fan_in) { return {false, 1 / std::sqrt(static_cast<double>(fan_in))}; }

void fill(Tensor& t, const Draw& draw, const at::Generator& generator) {
  if (draw.normal) {
    t.normal_(0.0, draw.scale, generator);
  } else {
    t.uniform_(-draw.scale, draw.scale, generator);
  }
}

/// Draws the whole tensor `name` as one `fill` of it would and keeps this
/// rank's boxes in `local`. A uniform fill on the CPU draws element after
/// element in memory order (ATen's cpu_serial_kernel), so blocks of rows drawn
/// in turn give the same values; a normal one is drawn whole (ATen's
/// normal_fill transforms groups of 16), only `bias_k`/`bias_v`'s (1, 1, E).
void draw_whole_keep(const std::string& name,
                     const Draw& draw,
                     const Shard& shard,
                     Tensor& local,
                     const at::Generator& generator) {
  const auto whole = shard.whole_sizes(name, local.sizes());
  const auto boxes = shard.boxes(name, whole);
  const int64_t row_elements = c10::multiply_integers(whole.begin() + 1, whole.end());
  const int64_t block_rows =
      draw.normal ? whole[0]
                  : std::max<int64_t>(1, kBlockElements / std::max<int64_t>(1, row_elements));
  for (int64_t first = 0; first < whole[0]; first += block_rows) {
    auto sizes = whole;
    sizes[0] = std::min(block_rows, whole[0] - first);
    Tensor block = torch::empty(sizes, local.options());  // rows [first, first + sizes[0])
    fill(block, draw, generator);
    int64_t stacked = 0;  // the box's first row in `local`
    for (const Box& box : boxes) {
      const int64_t lo = std::max(first, box.begin[0]);
      const int64_t hi = std::min(first + sizes[0], box.begin[0] + box.sizes[0]);
      if (lo < hi) {
        Box rows = box;
        rows.begin[0] = lo - first;
        rows.sizes[0] = hi - lo;
        local.narrow(0, stacked + lo - box.begin[0], hi - lo).copy_(narrow_box(block, rows));
      }
      stacked += box.sizes[0];
    }
  }
}

/// This rank's generator: seeded with one draw of the global one plus the rank.
at::Generator rank_generator(int rank) {
  auto global = at::detail::getDefaultCPUGenerator();
  uint64_t base = 0;
  {
    std::lock_guard<std::mutex> lock(global.mutex());
    base = global.get<at::CPUGeneratorImpl>()->random64();
  }
  return at::make_generator<at::CPUGeneratorImpl>(base + static_cast<uint64_t>(rank));
}

}  // namespace

void init_shard(torch::nn::Module& module, const Shard& shard, bool exact) {
  torch::NoGradGuard no_grad;
  const at::Generator generator =
      exact ? at::detail::getDefaultCPUGenerator() : rank_generator(shard.rank);
  auto params = module.named_parameters();
  // Python's order: out_proj (built, so drawn, in __init__), then _reset_parameters.
  static const std::array<const char*, 9> kOrder{
      "out_proj.weight", "out_proj.bias", "in_proj_weight", "q_proj_weight", "k_proj_weight",
      "v_proj_weight",   "in_proj_bias",  "bias_k",         "bias_v"};
  for (const std::string name : kOrder) {
    Tensor* local = params.find(name);
    if (local == nullptr) continue;
    const auto whole = shard.whole_sizes(name, local->sizes());
    if (name == "in_proj_bias" || (name == "out_proj.bias" && !exact)) {
      local->zero_();
      continue;
    }
    const Draw draw = name == "out_proj.weight" ? linear_weight(whole)
                      : name == "out_proj.bias"
                          ? linear_bias(/*fan_in=*/whole[0])  // (E, E)
                          : xavier(whole, name == "bias_k" || name == "bias_v");
    if (exact) {
      draw_whole_keep(name, draw, shard, *local, generator);
    } else {
      fill(*local, draw, generator);
    }
    if (name == "out_proj.bias") local->zero_();  // drawn by Linear, zeroed by _reset_parameters
  }
}

}  // namespace detail
}  // namespace mha
