#include "linear/packed_weight.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <utility>

#include "common/calling_thread.h"
#include "common/cpu_capability.h"
#include "linear/apply_fused_activation.h"
#include "linear/panel_gemm/panel_gemm.h"
#include "mha/kernel_switches.h"

namespace mha {
namespace detail {

using torch::Tensor;

PackedLayout default_packed_layout() {
  const bool onednn = PackedLinearOps::onednn().available() &&
                      best_cpu_capability() == CpuCapability::kAvx512 && !cpu_is_amd();
  return onednn ? PackedLayout::kOneDnn : PackedLayout::kPanels;
}

PackedWeightImpl::PackedWeightImpl(const Tensor& weight,
                                   std::vector<int64_t> block_rows,
                                   PackedLayout layout,
                                   const PackedLinearOps& ops)
    : BlockedWeightModule(std::move(block_rows), weight.size(1)), layout_(layout), ops_(&ops) {
  int64_t begin = 0;
  for (const int64_t rows : block_rows_) {
    const Tensor block = weight.narrow(0, begin, rows).contiguous();  // (rows, in)
    blocks_.push_back(layout == PackedLayout::kPanels ? to_panels(block) : ops.pack(block));
    begin += rows;
  }
  TORCH_INTERNAL_ASSERT(begin == weight.size(0), "packed blocks must cover the weight's rows");
}

Tensor PackedWeightImpl::forward_rows(int64_t begin,
                                      int64_t rows,
                                      const Tensor& x,
                                      const Tensor& bias) const {
  return gemm(begin, rows, x, bias, FusedActivation::kNone);
}

Tensor PackedWeightImpl::forward_activated(const Tensor& x,
                                           const Tensor& bias,
                                           FusedActivation activation) const {
  return gemm(0, out_features(), x, bias, activation);
}

Tensor PackedWeightImpl::gemm(int64_t begin,
                              int64_t rows,
                              const Tensor& x,
                              const Tensor& bias,
                              FusedActivation activation) const {
  check_gemm_input(x);
  if (python_kernels_enabled()) {  // Python's GEMM on the same values
    return apply_fused_activation(activation,
                                  at::linear(x, float_weight()->narrow(0, begin, rows), bias));
  }
  const Tensor flat = x.reshape({-1, in_features_}).contiguous();  // (..., in) -> (M, in)
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = rows;
  if (flat.size(0) == 0) return at::empty(sizes, x.options());
  if (block_rows_.size() == 1 && begin == 0 && rows == block_rows_[0]) {
    return multiply_block(0, flat, bias, activation).reshape(sizes);  // (M, out) -> (..., out)
  }
  Tensor out = multiply_row_blocks(block_rows_, begin, rows, [&](int64_t block) {
    return multiply_block(block, flat, Tensor(), FusedActivation::kNone);  // (M, rows of block)
  });
  if (bias.defined()) out.add_(bias);
  return apply_fused_activation(activation, out).reshape(sizes);  // (M, rows) -> (..., rows)
}

Tensor PackedWeightImpl::multiply_block(int64_t block,
                                        const Tensor& x,
                                        const Tensor& bias,
                                        FusedActivation activation) const {
  if (layout_ == PackedLayout::kOneDnn) {
    // a small GEMM on the calling thread: waking a sleeping worker costs more
    return on_calling_thread_if_small(
        x.size(0) * in_features_ * block_rows_[block],
        [&] { return ops_->multiply(x, blocks_[block], bias, activation); },
        kCallingThreadMultiplyAdds);
  }
  return panel_gemm(x, blocks_[block], block_rows_[block], bias, activation);  // (M, rows)
}

std::optional<Tensor> PackedWeightImpl::float_weight() const {
  std::vector<Tensor> rows;
  for (size_t i = 0; i < blocks_.size(); ++i) {  // (rows_i, in)
    rows.push_back(layout_ == PackedLayout::kPanels ? from_panels(blocks_[i], block_rows_[i])
                                                    : blocks_[i].to_dense());
  }
  return rows.size() == 1 ? rows[0] : at::cat(rows, /*dim=*/0);  // (out, in)
}

std::shared_ptr<PackedWeightImpl> PackedWeightImpl::repacked(const Tensor& weight) const {
  return std::make_shared<PackedWeightImpl>(weight, block_rows_, layout_, *ops_);
}

void PackedWeightImpl::save(torch::serialize::OutputArchive& archive) const {
  archive.write("weight", *float_weight(), /*is_buffer=*/true);  // float32 (out, in)
  archive.write("block_rows", at::tensor(block_rows_, at::kLong), /*is_buffer=*/true);
}

namespace {

/// What `PackedWeightImpl::save` wrote: the weight and its block rows.
struct ArchivedPacked {
  Tensor weight, block_rows;
};

/// Reads `archive`; throws unless it holds a float32 (`out`, `in`) weight
/// (`name` in the message).
ArchivedPacked read_packed(torch::serialize::InputArchive& archive,
                           int64_t out,
                           int64_t in,
                           const std::string& name) {
  ArchivedPacked a;
  archive.read("weight", a.weight, /*is_buffer=*/true);
  archive.read("block_rows", a.block_rows, /*is_buffer=*/true);
  TORCH_CHECK(a.weight.scalar_type() == at::kFloat && a.weight.dim() == 2 &&
                  a.weight.size(0) == out && a.weight.size(1) == in,
              "torch::load: expected the archived prepacked weight ", name, " of shape [", out,
              ", ", in, "] float32, but got ", a.weight.sizes(), " of ",
              c10::toString(a.weight.scalar_type()));
  return a;
}

}  // namespace

void PackedWeightImpl::check_archived(torch::serialize::InputArchive& archive,
                                      const std::string& name) const {
  read_packed(archive, out_features(), in_features_, name);
}

void PackedWeightImpl::load(torch::serialize::InputArchive& archive) {
  const auto [weight, block_rows] = read_packed(archive, out_features(), in_features_, name());
  const Tensor rows = block_rows.contiguous();
  const PackedWeightImpl loaded(
      weight.contiguous(),
      std::vector<int64_t>(rows.data_ptr<int64_t>(), rows.data_ptr<int64_t>() + rows.numel()),
      layout_, *ops_);  // packed before any change
  blocks_ = loaded.blocks_;
  block_rows_ = loaded.block_rows_;
}

void PackedWeightImpl::pretty_print(std::ostream& stream) const {
  stream << fmt::format("mha::PackedWeight(out_features={}, in_features={}, blocks={}{})",
                        out_features(), in_features_, block_rows_,
                        layout_ == PackedLayout::kPanels ? ", panels=true" : "");
}

}  // namespace detail
}  // namespace mha
