#pragma once

// Private: a float32 weight held once, prepacked (`mha::prepack`), owned by
// the module that owns the parameter, as IPEX's `ipex.optimize` replaces a
// Linear's weight by its packed form. Two layouts: oneDNN's blocked one, the
// form PyTorch's frozen CPU inference uses (`mkldnn::_reorder_linear_weight`,
// `mkldnn::_linear_pointwise`, torch/_inductor/fx_passes/mkldnn_fusion.py),
// or mha's panels (linear/panel_gemm/panel_gemm.h) for calls of a few rows.
// Either is a permutation of the values: `float_weight()` gives them back bit
// for bit (for `torch::save`, `state_dict` and Python's kernels).

#include <torch/nn/cloneable.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "linear/blocked_weight.h"
#include "linear/packed_linear.h"
#include "linear/weight_form.h"

namespace mha {
namespace detail {

/// How a prepacked weight is laid out, and whose GEMM multiplies it.
enum class PackedLayout {
  kOneDnn,  ///< oneDNN's blocked layout and GEMM: the fastest from tens of rows up
  kPanels,  ///< mha's panels and GEMM (panel_gemm.h): the fastest at a few rows
};

/// `mha::prepack`'s layout where `PrepackOptions::panels` is unset: oneDNN's
/// on an Intel CPU with AVX-512 where LibTorch has oneDNN's ops, else panels.
PackedLayout default_packed_layout();

/// The prepacked form of one float32 weight parameter (out, in), packed in
/// row blocks as `Int8WeightImpl` is (a decoder's cross-attention
/// `in_proj_weight`: q, then [k; v], projected apart).
class PackedWeightImpl : public BlockedWeightModule<PackedWeightImpl> {
 public:
  /// Packs `weight` (out, in) float32 CPU in blocks of `block_rows` rows
  /// (their sum: out) in `layout` (with kOneDnn `ops` must be available).
  PackedWeightImpl(const torch::Tensor& weight,
                   std::vector<int64_t> block_rows,
                   PackedLayout layout = PackedLayout::kOneDnn,
                   const PackedLinearOps& ops = PackedLinearOps::onednn());

  /// Rows [begin, begin + rows) of x's product with the weight, plus `bias`:
  /// the layout's GEMM on the packed blocks (within float32 rounding of
  /// `at::linear`); with Python's kernels on (`set_python_kernels`)
  /// `at::linear` on `float_weight()`.
  torch::Tensor forward_rows(int64_t begin,
                             int64_t rows,
                             const torch::Tensor& x,
                             const torch::Tensor& bias) const override;
  /// One GEMM with the ReLU or GELU fused (one block; else as WeightForm's).
  torch::Tensor forward_activated(const torch::Tensor& x,
                                  const torch::Tensor& bias,
                                  FusedActivation activation) const override;
  /// The float32 (out, in) values, unpacked (a copy).
  std::optional<torch::Tensor> float_weight() const override;
  /// The layout of its blocks.
  PackedLayout layout() const { return layout_; }
  const char* kind() const override { return "prepacked (mha::prepack)"; }
  void check_archived(torch::serialize::InputArchive& archive,
                      const std::string& name) const override;
  /// The same blocks with other values (a load): `weight` (out, in).
  std::shared_ptr<PackedWeightImpl> repacked(const torch::Tensor& weight) const;

  void pretty_print(std::ostream& stream) const override;

  /// `torch::save`'s step: the float32 values (unpacked) and the block rows.
  void save(torch::serialize::OutputArchive& archive) const override;
  /// `torch::load`'s step: reads what `save` wrote and packs it (an archive of
  /// another shape is a c10::Error that changes nothing).
  void load(torch::serialize::InputArchive& archive) override;

 private:
  /// forward_rows, then `activation` (fused when one block is all rows).
  torch::Tensor gemm(int64_t begin,
                     int64_t rows,
                     const torch::Tensor& x,
                     const torch::Tensor& bias,
                     FusedActivation activation) const;

  /// x (M, in) times block `block`, plus `bias`: (M, rows of block).
  torch::Tensor multiply_block(int64_t block,
                               const torch::Tensor& x,
                               const torch::Tensor& bias,
                               FusedActivation activation) const;

  PackedLayout layout_;
  std::vector<torch::Tensor> blocks_;  // one per block: oneDNN's (rows_i, in) or panels
  const PackedLinearOps* ops_;
};

}  // namespace detail
}  // namespace mha
