#include "linear/packed_linear.h"

#include <ATen/ATen.h>
#include <ATen/core/stack.h>

#include <functional>
#include <string>
#include <vector>

#include "linear/weight_form.h"

namespace mha {
namespace detail {

using torch::Tensor;

PackedLinearOps::PackedLinearOps(const char* pack_op, const char* linear_op)
    : pack_(c10::Dispatcher::singleton().findSchema({pack_op, ""})),
      linear_(c10::Dispatcher::singleton().findSchema({linear_op, ""})) {}

const PackedLinearOps& PackedLinearOps::onednn() {
  static const PackedLinearOps ops("mkldnn::_reorder_linear_weight", "mkldnn::_linear_pointwise");
  return ops;
}

bool PackedLinearOps::available() const {
  return pack_.has_value() && linear_.has_value() && at::hasMKLDNN();
}

Tensor PackedLinearOps::pack(const Tensor& weight) const {
  // _reorder_linear_weight(Tensor self, int? batch_size=None) -> Tensor
  torch::jit::Stack stack{weight, c10::IValue()};
  pack_->callBoxed(stack);
  return stack.back().toTensor();
}

Tensor PackedLinearOps::multiply(const Tensor& x,
                                 const Tensor& packed,
                                 const Tensor& bias,
                                 FusedActivation activation) const {
  // _linear_pointwise(Tensor X, Tensor W, Tensor? B, str attr, Scalar?[] scalars,
  // str? algorithm) -> Tensor; attr "none": no fused activation, "relu": ReLU,
  // "gelu" with algorithm "none": the exact (erf) GELU, as at::gelu's default
  const bool gelu = activation == FusedActivation::kGELU;
  const char* attr = activation == FusedActivation::kReLU ? "relu" : gelu ? "gelu" : "none";
  torch::jit::Stack stack{x,
                          packed,
                          bias.defined() ? c10::IValue(bias) : c10::IValue(),
                          std::string(attr),
                          c10::List<std::optional<c10::Scalar>>(),
                          gelu ? c10::IValue(std::string("none")) : c10::IValue()};
  linear_->callBoxed(stack);
  return stack.back().toTensor();
}

namespace {

thread_local int64_t fixed_row_block = 0;  // 0: any row count

/// `gemm` in blocks of `block` rows: x (..., in) -> (..., out).
Tensor gemm_in_row_blocks(const Tensor& x,
                          const std::function<Tensor(const Tensor&)>& gemm,
                          int64_t block) {
  const Tensor rows = x.reshape({-1, x.size(-1)});  // (M, in)
  const int64_t m = rows.size(0), padded = (m + block - 1) / block * block;
  const Tensor input = padded == m ? rows : at::constant_pad_nd(rows, {0, 0, 0, padded - m});
  std::vector<Tensor> outs;
  for (int64_t start = 0; start < padded; start += block) {
    outs.push_back(gemm(input.narrow(0, start, block)));  // (block, out)
  }
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = outs.front().size(-1);
  return at::cat(outs).narrow(0, 0, m).reshape(sizes);  // (padded, out) -> (..., out)
}

}  // namespace

FixedRowBlocks::FixedRowBlocks(int64_t rows) : previous_(fixed_row_block) {
  fixed_row_block = rows;
}

FixedRowBlocks::~FixedRowBlocks() { fixed_row_block = previous_; }

Tensor in_row_blocks(const Tensor& x, const std::function<Tensor(const Tensor&)>& gemm) {
  if (fixed_row_block > 0 && x.dim() >= 1 && x.numel() > 0) {
    return gemm_in_row_blocks(x, gemm, fixed_row_block);
  }
  return gemm(x);
}

Tensor linear_rows(const Tensor& x,
                   const Tensor& weight,
                   const Tensor& bias,
                   const WeightForm* form) {
  return in_row_blocks(x, [&](const Tensor& rows) {
    return form ? form->forward(rows, bias) : at::linear(rows, weight, bias);
  });
}

}  // namespace detail
}  // namespace mha
