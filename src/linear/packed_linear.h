#pragma once

// Private: the float32 CPU GEMMs of mha's own inference kernels (the input and
// output projections of the fused and head-by-head fast paths and of the
// cached decoding step, the Transformer layers' feed-forward linears) on
// weights prepacked by oneDNN, the form PyTorch's frozen CPU inference uses
// (`mkldnn::_reorder_linear_weight`, `mkldnn::_linear_pointwise`,
// torch/_inductor/fx_passes/mkldnn_fusion.py). Those ops have no `at::`
// function: they are looked up through the dispatcher, and without them every
// call is `at::linear`. A weight is packed on its first use by a call that
// needs no autograd and packed again after it changes (an in-place edit bumps
// its version counter; `set_data`, `to()` and loading give it new storage).
// Python's kernels (`set_python_kernels`) never come here.

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>

namespace mha {
namespace detail {

/// Which GEMMs take the packed weight: from `kPackedMinRows` to
/// `kPackedMaxRows` rows (M, the product of x's leading sizes) on weights
/// (out x in) of at least `kPackedMinWeightElements`, and below
/// `kPackedSmallWeightMinRows` rows only on weights of at least
/// `kPackedLargeWeightElements`. The bounds are where the packed GEMM was
/// measured faster than `at::linear` at one and two threads, and where from
/// 128 rows the gain stops paying for the fused attention kernel that packed
/// projections select (`choose_fast_path_kernel`): docs/benchmarks.md,
/// "Prepacked weights, the decode step and threads", has the measurements.
constexpr int64_t kPackedMinRows = 8;
constexpr int64_t kPackedMaxRows = 64;
constexpr int64_t kPackedMinWeightElements = 512 * 512;
constexpr int64_t kPackedSmallWeightMinRows = 16;
constexpr int64_t kPackedLargeWeightElements = 1536 * 512;

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
  /// x (M, in) times a packed (out, in) weight, plus bias: -> (M, out).
  torch::Tensor multiply(const torch::Tensor& x,
                         const torch::Tensor& packed,
                         const torch::Tensor& bias) const;

 private:
  std::optional<c10::OperatorHandle> pack_;
  std::optional<c10::OperatorHandle> linear_;
};

/// Whether `packed_linear` would take the packed GEMM for these tensors:
/// float32 strided CPU tensors, a 2-D weight that is not an inference tensor
/// (it has no version counter), rows and weight size as above, no autograd
/// needed, Python's kernels off, and `ops` available.
bool takes_packed_gemm(const PackedLinearOps& ops,
                       const torch::Tensor& x,
                       const torch::Tensor& weight,
                       const torch::Tensor& bias);

/// `at::linear(x, weight, bias)`: x (..., in) -> (..., out), on the packed
/// weight when `takes_packed_gemm` (within float32 rounding of `at::linear`),
/// else `at::linear` itself. Thread-safe: concurrent first calls pack once.
torch::Tensor packed_linear(const torch::Tensor& x,
                            const torch::Tensor& weight,
                            const torch::Tensor& bias,
                            const PackedLinearOps& ops = PackedLinearOps::onednn());

/// How many packed weights are held (tests: packing once, dropping the
/// packed form of a weight that is gone).
int64_t packed_weight_count();

/// While one lives, `packed_linear` on this thread computes its rows in
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
