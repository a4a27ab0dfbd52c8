#pragma once

// Private: what `mha::quantize_dynamic` and `mha::prepack` share: finding the
// weights a conversion selects under a module (attention projections, the
// Transformer layers' and other `torch::nn::Linear`s, the stacks' prototype
// layers), checking them all, then swapping every converted form in at once
// (so an error changes nothing).

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace mha {
namespace detail {

/// Which weights a conversion takes, and its name for messages.
struct ConversionSelection {
  std::string caller;  // "quantize_dynamic"
  bool attention = true;
  bool linears = true;
  /// Prepacked weights are converted too, from their float values (int8 from
  /// prepacked); else every converted weight is left as it is.
  bool from_prepacked = false;
};

/// One weight parameter to convert: its owner, name, handle, float32
/// values (the parameter, or its prepacked form's) and row blocks (a decoder
/// layer's cross-attention `in_proj_weight`: q, then [k; v]).
struct Conversion {
  torch::nn::Module* owner;
  std::string param;
  torch::Tensor* weight;
  torch::Tensor values;
  std::vector<int64_t> block_rows;
  std::string replaced_form;                // the owner's child the form replaces, or ""
  std::shared_ptr<torch::nn::Module> form;  // made by the caller before `commit`
};

/// The weights to convert, and the stacks' new prototype layers, installed
/// after the conversions.
struct ConversionPlan {
  std::vector<Conversion> conversions;
  std::vector<std::function<void()>> installs;
};

/// Every float32 CPU weight `selection` takes under `module` that is not
/// converted yet (or prepacked, with `from_prepacked`). Throws a c10::Error listing every weight it
/// cannot take (not float32 on the CPU, tensor-parallel attention), changing nothing.
ConversionPlan plan_conversion(torch::nn::Module& module, const ConversionSelection& selection);

/// The swap: each form in as the child `<param><suffix>` of its owner (the
/// form it replaces out), the float weight's elements out (a placeholder), the owner's parameters
/// no longer requiring grad (inference only); then the prototypes installed.
void commit(const ConversionPlan& plan, const std::string& suffix);

}  // namespace detail
}  // namespace mha
