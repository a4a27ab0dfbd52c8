#pragma once

// Private: the float32 GEMMs of mha's own calls (the input and output
// projections of the fast-path kernels and of the cached and paged calls, the
// Transformer layers' feed-forward linears): `at::linear` on a float weight,
// or oneDNN's GEMM on a weight `mha::prepack` converted (`PackedWeightImpl`),
// and the fixed row blocks of batch-invariant serving. oneDNN's two ops have
// no `at::` function: they are looked up through the dispatcher, and without
// them `mha::prepack` refuses to convert.

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <optional>

#include "linear/fused_activation.h"

namespace mha {
namespace detail {

class WeightForm;

/// The two dispatcher ops that pack a linear's weight and multiply by it.
class PackedLinearOps {
 public:
  /// Looks both ops up by name (e.g. "mkldnn::_reorder_linear_weight"); a name
  /// this LibTorch does not register leaves `available()` false.
  PackedLinearOps(const char* pack_op, const char* linear_op);
  /// This process's oneDNN ops, looked up once.
  static const PackedLinearOps& onednn();

  /// Whether both ops were found and ATen was built with oneDNN.
  bool available() const;
  /// `weight` (out, in) in oneDNN's blocked layout, for any number of rows.
  torch::Tensor pack(const torch::Tensor& weight) const;
  /// x (M, in) times a packed (out, in) weight, plus bias, then
  /// `activation` (oneDNN's post-op, in the GEMM's epilogue): -> (M, out).
  torch::Tensor multiply(const torch::Tensor& x,
                         const torch::Tensor& packed,
                         const torch::Tensor& bias,
                         FusedActivation activation = FusedActivation::kNone) const;

 private:
  std::optional<c10::OperatorHandle> pack_;
  std::optional<c10::OperatorHandle> linear_;
};

/// `gemm(x)`, x (..., in) -> (..., out); while a `FixedRowBlocks` lives on
/// this thread, `gemm` of each block of fixed rows, concatenated.
torch::Tensor in_row_blocks(const torch::Tensor& x,
                            const std::function<torch::Tensor(const torch::Tensor&)>& gemm);

/// x (..., in) -> (..., out): `form`'s GEMM when given (a converted weight),
/// else `at::linear(x, weight, bias)`; in blocks of fixed rows while a
/// `FixedRowBlocks` lives on this thread.
torch::Tensor linear_rows(const torch::Tensor& x,
                          const torch::Tensor& weight,
                          const torch::Tensor& bias,
                          const WeightForm* form);

/// While one lives, `in_row_blocks` on this thread computes its rows in
/// blocks of exactly `rows` (the last padded with zeros): every GEMM has
/// the same shape whatever the number of rows, so a row's result does not
/// depend on the other rows of the call (`ContinuousBatchOptions::batch_invariant`).
class FixedRowBlocks {
 public:
  explicit FixedRowBlocks(int64_t rows);
  ~FixedRowBlocks();
  FixedRowBlocks(const FixedRowBlocks&) = delete;
  FixedRowBlocks& operator=(const FixedRowBlocks&) = delete;

 private:
  int64_t previous_;
};

}  // namespace detail
}  // namespace mha
