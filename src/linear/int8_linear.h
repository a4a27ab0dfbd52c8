#pragma once

// Private: int8 weights and their GEMM (`mha::quantize_dynamic`). FBGEMM's
// dynamic int8 linear (`quantized::linear_prepack`, `quantized::linear_dynamic`,
// `quantized::linear_unpack`: dispatcher ops, no `at::` functions) holds a
// weight packed for its GEMM; activations are quantized per call from their
// min and max. The GEMM calls the packed object's `apply_dynamic` directly
// (the op's own body, aten/src/ATen/native/quantized/cpu/qlinear_dynamic.cpp),
// without the dispatcher's boxing of every call; where the packed value is not
// `LinearPackedParamsBase` it falls back to the boxed op. A converted parameter is a placeholder
// and its int8 form the child module `<name>_int8` of the module holding it (linear/weight_form.h).

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/quantized/PackedParams.h>
#include <mha/quantize_recipe.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/linear.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "linear/blocked_weight.h"
#include "linear/weight_form.h"

namespace mha {
namespace detail {

/// One packed block: the op's value and, where it holds ATen's
/// `LinearPackedParamsBase`, that object (called without the dispatcher).
struct PackedInt8Block {
  c10::IValue packed;
  c10::intrusive_ptr<LinearPackedParamsBase> direct;  // null: the boxed op
};

/// FBGEMM's three dynamic int8 linear ops, found by name.
class Int8GemmOps {
 public:
  /// Looks the ops up (e.g. "quantized::linear_prepack"); a name this LibTorch
  /// does not register leaves `unavailable_reason()` non-empty. With
  /// `call_directly` false every GEMM goes through the boxed op (the fallback).
  Int8GemmOps(const char* prepack_op,
              const char* dynamic_op,
              const char* unpack_op,
              bool call_directly = true);
  /// This process's FBGEMM ops, looked up once.
  static const Int8GemmOps& fbgemm();

  /// Empty when the ops exist and the quantized engine packs linear weights
  /// for FBGEMM (x86 or fbgemm); else why not, for an error message.
  std::string unavailable_reason() const;
  /// A qint8 weight (out, in), per channel or per tensor -> FBGEMM's packed form.
  PackedInt8Block pack(const torch::Tensor& qweight) const;
  /// x (M, in) float32 times the packed weight -> (M, out) float32.
  torch::Tensor multiply(const torch::Tensor& x,
                         const PackedInt8Block& block,
                         bool reduce_range) const;
  /// The packed weight's qint8 tensor (out, in), as it was packed.
  torch::Tensor unpack(const PackedInt8Block& block) const;

 private:
  std::optional<c10::OperatorHandle> prepack_, dynamic_, unpack_;
  bool call_directly_;
};

/// A weight's int8 values and scales: values int8 (out, in); scales float64,
/// (out) per output channel or 0-d for one scale.
struct Int8Values {
  torch::Tensor values;
  torch::Tensor scales;
};

/// `weight` (out, in) float32 quantized by `recipe` (mha/quantize_recipe.h):
/// `at::quantize_per_channel` / `at::quantize_per_tensor` with zero points 0.
Int8Values quantize_weight(const torch::Tensor& weight, QuantizeRecipe recipe);

/// Whether a recipe quantizes activations over 0..127 (`reduce_range`).
bool recipe_reduces_range(QuantizeRecipe recipe);

/// The int8 form of one weight parameter, packed in row blocks: one, or for a
/// decoder's cross-attention `in_proj_weight` two, q and [k; v] (the query
/// and the memory are projected apart). Rows quantize per channel as the
/// whole weight does, and FBGEMM's outputs do not depend on the split (int32
/// sums, a per-element epilogue): tests/quantization_test.cpp compares with
/// Python's GEMMs on the rows Python slices.
class Int8WeightImpl : public BlockedWeightModule<Int8WeightImpl> {
 public:
  /// Packs `weight`, quantized by `recipe`, in blocks of `block_rows` rows
  /// (their sum: the rows).
  Int8WeightImpl(const Int8Values& weight,
                 QuantizeRecipe recipe,
                 std::vector<int64_t> block_rows,
                 const Int8GemmOps& ops = Int8GemmOps::fbgemm());

  /// Rows [begin, begin + rows) of x's product with the weight: FBGEMM's
  /// int8 GEMM on the blocks holding them.
  torch::Tensor forward_rows(int64_t begin,
                             int64_t rows,
                             const torch::Tensor& x,
                             const torch::Tensor& bias) const override;
  /// None: int8 values are not the float weight.
  std::optional<torch::Tensor> float_weight() const override { return std::nullopt; }

  /// The int8 values (unpacked from FBGEMM's form) and the scales.
  Int8Values values() const;
  /// The same blocks and recipe with other values (a load).
  std::shared_ptr<Int8WeightImpl> repacked(const Int8Values& weight) const;
  QuantizeRecipe recipe() const { return recipe_; }
  const char* kind() const override { return "int8 (mha::quantize_dynamic)"; }
  void check_archived(torch::serialize::InputArchive& archive,
                      const std::string& name) const override;
  /// float64 (out), or 0-d for one scale.
  const torch::Tensor& scales() const { return scales_; }

  void pretty_print(std::ostream& stream) const override;

  /// `torch::save`'s step: the int8 values (unpacked), scales, block rows and
  /// recipe, so that an archive carries the int8 weights.
  void save(torch::serialize::OutputArchive& archive) const override;
  /// `torch::load`'s step: reads what `save` wrote and packs it (an archive of
  /// another shape is a c10::Error that changes nothing).
  void load(torch::serialize::InputArchive& archive) override;

 private:
  void check_input(const torch::Tensor& x) const;
  /// x (M, in) -> (M, rows of block `block`).
  torch::Tensor multiply_block(int64_t block, const torch::Tensor& x) const;

  std::vector<PackedInt8Block> blocks_;  // FBGEMM's packed weights, one per block
  torch::Tensor scales_;                 // float64 (out) or 0-d
  QuantizeRecipe recipe_;
  const Int8GemmOps* ops_;
};

/// The converted form of a `Linear`'s weight (int8 or prepacked), or null (a
/// look-up only when its weight is a placeholder).
std::shared_ptr<const WeightForm> linear_form(const torch::nn::LinearImpl& linear);

/// mha's own calls of a `Linear`: x (..., in) -> (..., out), on its int8 or
/// prepacked form when converted, else `at::linear` (`linear_rows`).
torch::Tensor linear_int8_or_packed(const torch::nn::LinearImpl& linear, const torch::Tensor& x);

}  // namespace detail
}  // namespace mha
