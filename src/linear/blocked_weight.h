#pragma once

// Private: what the int8 (`Int8WeightImpl`) and prepacked (`PackedWeightImpl`)
// weights share as modules: no parameters of their own (reset() does
// nothing), the values kept in blocks of rows of one width, and no
// conversion but to float32 on the CPU (nothing to convert).

#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/nn/cloneable.h>
#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "linear/weight_form.h"

namespace mha {
namespace detail {

/// The module side of a converted weight `Derived`, (out, in) in blocks of
/// `block_rows` rows (their sum: out).
template <typename Derived>
class BlockedWeightModule : public torch::nn::Cloneable<Derived>, public WeightForm {
 public:
  void reset() override {}

  int64_t out_features() const override {
    return std::accumulate(block_rows_.begin(), block_rows_.end(), int64_t{0});
  }
  int64_t in_features() const override { return in_features_; }

  /// x (..., in) -> (..., out), plus `bias`: every row block's GEMM.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& bias) const override {
    return this->forward_rows(0, out_features(), x, bias);
  }

  /// Conversions other than to float32 on the CPU throw (nothing to convert).
  void to(torch::Device device, torch::Dtype dtype, bool /*non_blocking*/ = false) override {
    reject_conversion(this->kind(), device, dtype);
  }
  void to(torch::Dtype dtype, bool /*non_blocking*/ = false) override {
    reject_conversion(this->kind(), std::nullopt, dtype);
  }
  void to(torch::Device device, bool /*non_blocking*/ = false) override {
    reject_conversion(this->kind(), device, std::nullopt);
  }

 protected:
  BlockedWeightModule(std::vector<int64_t> block_rows, int64_t in_features)
      : block_rows_(std::move(block_rows)), in_features_(in_features) {}

  /// Throws unless `x` (..., in_features) is a float32 CPU strided tensor
  /// that needs no gradient (the converted GEMMs have no autograd), with
  /// `at::linear`'s message for a wrong width.
  void check_gemm_input(const torch::Tensor& x) const {
    TORCH_CHECK(!(c10::GradMode::is_enabled() && x.requires_grad()),
                fmt::format("{} weights have no autograd: call under torch::NoGradGuard or "
                            "torch::InferenceMode, or with inputs that do not require grad",
                            this->kind()));
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat && x.layout() == at::kStrided,
                fmt::format("{} weights expect float32 CPU inputs, but got {} on {}", this->kind(),
                            c10::toString(x.scalar_type()), x.device().str()));
    const int64_t width = x.dim() >= 1 ? x.size(-1) : 0;
    TORCH_CHECK(x.dim() >= 1 && width == in_features_,
                fmt::format("mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
                            x.dim() >= 1 ? x.numel() / std::max<int64_t>(width, 1) : 0, width,
                            in_features_, out_features()));
  }

  std::vector<int64_t> block_rows_;  // rows of each block, summing to out_features()
  int64_t in_features_;
};

}  // namespace detail
}  // namespace mha
