// mha::prepack: finds the weights to convert, checks and packs them all, then
// swaps them in (so an error changes nothing). mha::unpack: the float values
// back in the parameters.

#include <c10/util/Exception.h>
#include <mha/prepack.h>
#include <mha/transformer_coder.h>

#include <string>
#include <utility>
#include <vector>

#include "linear/converted_module.h"
#include "linear/packed_weight.h"
#include "linear/weight_form.h"
#include "quantization/conversion_plan.h"

namespace mha {

namespace {

/// `module`'s own prepacked children: (the form's child name, its float32 values).
std::vector<std::pair<std::string, torch::Tensor>> packed_children(
    const torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& child : module.named_children()) {
    if (auto packed = std::dynamic_pointer_cast<detail::PackedWeightImpl>(child.value())) {
      out.emplace_back(child.key(), *packed->float_weight());
    }
  }
  return out;
}

/// A stack's prototype layer unpacked: a clone when it holds prepacked
/// weights (the layer a caller may still hold is left alone), else itself.
template <typename Layer>
Layer unpacked_prototype(const Layer& prototype) {
  if (!is_prepacked(*prototype)) return prototype;
  auto copy = std::dynamic_pointer_cast<typename Layer::Impl>(prototype->clone());
  unpack(*copy);
  return Layer(copy);
}

/// The layout `options` ask for: `panels`, or where unset, the default.
detail::PackedLayout packed_layout(const PrepackOptions& options) {
  if (!options.panels()) return detail::default_packed_layout();
  TORCH_CHECK(*options.panels() || detail::PackedLinearOps::onednn().available(),
              "prepack: prepacked weights need oneDNN's mkldnn::_reorder_linear_weight and "
              "mkldnn::_linear_pointwise, which this LibTorch does not have; "
              "PrepackOptions().panels(true) needs neither");
  return *options.panels() ? detail::PackedLayout::kPanels : detail::PackedLayout::kOneDnn;
}

}  // namespace

void prepack(torch::nn::Module& module, const PrepackOptions& options) {
  const detail::PackedLayout layout = packed_layout(options);
  detail::ConversionPlan plan =
      detail::plan_conversion(module, {"prepack", options.attention(), options.linears()});
  torch::NoGradGuard no_grad;
  for (detail::Conversion& c : plan.conversions) {
    c.form = std::make_shared<detail::PackedWeightImpl>(c.values, c.block_rows, layout);
  }
  detail::commit(plan, "_packed");
}

bool is_prepacked(const torch::nn::Module& module) { return detail::holds_prepacked(module); }

void unpack(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (const auto& m : module.named_modules("", /*include_self=*/true)) {
    torch::nn::Module& owner = *m.value();
    const auto unpacked = packed_children(owner);
    for (auto& [child, values] : unpacked) {
      owner.named_parameters(/*recurse=*/false)[*detail::converted_param(child)].set_data(values);
      owner.unregister_module(child);
    }
    // prepack turned requires_grad off; at::matmul picks its kernel by it even
    // without grad mode, so the float module's bits need it back on
    if (!unpacked.empty()) {
      for (auto& param : owner.parameters(/*recurse=*/false)) {
        if (param.defined()) param.set_requires_grad(!detail::is_placeholder(param));
      }
    }
    if (auto* encoder = dynamic_cast<TransformerEncoderImpl*>(&owner)) {
      encoder->options.encoder_layer(unpacked_prototype(encoder->options.encoder_layer()));
    }
    if (auto* decoder = dynamic_cast<TransformerDecoderImpl*>(&owner)) {
      decoder->options.decoder_layer(unpacked_prototype(decoder->options.decoder_layer()));
    }
  }
}

}  // namespace mha
