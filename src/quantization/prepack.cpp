// mha::prepack: finds the weights to convert, checks and packs them all, then
// swaps them in (so an error changes nothing).

#include <c10/util/Exception.h>
#include <mha/prepack.h>

#include "linear/converted_module.h"
#include "linear/packed_weight.h"
#include "quantization/conversion_plan.h"

namespace mha {

void prepack(torch::nn::Module& module, const PrepackOptions& options) {
  TORCH_CHECK(detail::PackedLinearOps::onednn().available(),
              "prepack: prepacked weights need oneDNN's mkldnn::_reorder_linear_weight and "
              "mkldnn::_linear_pointwise, which this LibTorch does not have");
  detail::ConversionPlan plan =
      detail::plan_conversion(module, {"prepack", options.attention(), options.linears()});
  torch::NoGradGuard no_grad;
  for (detail::Conversion& c : plan.conversions) {
    c.form = std::make_shared<detail::PackedWeightImpl>(*c.weight, c.block_rows);
  }
  detail::commit(plan, "_packed");
}

bool is_prepacked(const torch::nn::Module& module) { return detail::holds_prepacked(module); }

}  // namespace mha
