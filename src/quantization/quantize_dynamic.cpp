// mha::quantize_dynamic: finds the weights to convert, checks and quantizes
// them all, then swaps them in (so an error changes nothing).

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <mha/quantization.h>

#include <string>

#include "linear/converted_module.h"
#include "linear/int8_linear.h"
#include "linear/packed_linear.h"
#include "quantization/conversion_plan.h"

namespace mha {

void quantize_dynamic(torch::nn::Module& module, const QuantizeOptions& options) {
  const std::string unavailable = detail::Int8GemmOps::fbgemm().unavailable_reason();
  TORCH_CHECK(unavailable.empty(),
              "quantize_dynamic: int8 weights need FBGEMM's dynamic linear: ", unavailable);
  detail::ConversionPlan plan =
      detail::plan_conversion(module, {"quantize_dynamic", options.attention(), options.linears(),
                                       /*from_prepacked=*/true});
  torch::NoGradGuard no_grad;
  for (detail::Conversion& c : plan.conversions) {
    c.form = std::make_shared<detail::Int8WeightImpl>(
        detail::quantize_weight(c.values, options.recipe()), options.recipe(), c.block_rows);
  }
  detail::commit(plan, "_int8");
}

bool is_quantized(const torch::nn::Module& module) { return detail::holds_int8(module); }

torch::Tensor linear(const torch::nn::LinearImpl& linear, const torch::Tensor& x) {
  // The form's GEMM, or LinearImpl::forward's F::linear; in fixed row blocks
  // inside a batch-invariant step (ContinuousBatchOptions::batch_invariant).
  return detail::linear_rows(x, linear.weight, linear.bias, detail::linear_form(linear).get());
}

}  // namespace mha
