#include "mha/layer_norm.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/init.h>

#include "common/calling_thread.h"

namespace mha {

LayerNormOptions::LayerNormOptions(std::vector<int64_t> normalized_shape)
    : normalized_shape_(std::move(normalized_shape)) {}

void LayerNormImpl::reset() {
  // Absent parameters are registered undefined, so named_parameters() (which
  // skips them) equals Python's state_dict() keys.
  const bool affine = options.elementwise_affine();
  const bool with_bias = affine && options.bias();
  weight = register_parameter(
      "weight", affine ? torch::empty(options.normalized_shape()) : torch::Tensor(), affine);
  bias = register_parameter(
      "bias", with_bias ? torch::empty(options.normalized_shape()) : torch::Tensor(), with_bias);
  reset_parameters();
}

void LayerNormImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  if (weight.defined()) weight.fill_(1.0);
  if (bias.defined()) bias.zero_();
}

torch::Tensor LayerNormImpl::forward(const torch::Tensor& input) {
  // input (..., *normalized_shape) -> same shape; rows are independent, so
  // the thread count changes nothing but the time
  return detail::on_calling_thread_if_small(input.numel(), [&] {
    return at::layer_norm(input, options.normalized_shape(), weight, bias, options.eps());
  });
}

void LayerNormImpl::pretty_print(std::ostream& stream) const {
  stream << fmt::format("mha::LayerNorm([{}], eps={}, elementwise_affine={}, bias={})",
                        fmt::join(options.normalized_shape(), ", "), options.eps(),
                        options.elementwise_affine(), options.bias());
}

}  // namespace mha
