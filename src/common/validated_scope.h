#pragma once

// Private: validation once per call. The outermost mha entry a user calls (a
// Transformer, a stack, a layer, the attention module) checks every input
// with its own argument names (src, tgt, memory, query, ...), then holds a
// `ValidatedScope` naming the mha modules it calls with those inputs (a
// stack's layers, a layer's attention modules). Those modules see that they
// are covered and skip their checks; any other module, e.g. one called by a
// user's activation function or norm, checks its inputs as usual.

#include <c10/macros/Macros.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <algorithm>
#include <vector>

namespace mha {
namespace detail {

/// Marks, on this thread and while it lives, `modules` as called with inputs
/// that an outer entry has validated.
class ValidatedScope {
 public:
  explicit ValidatedScope(const std::vector<const torch::nn::Module*>& modules)
      : mark_(covered_.size()) {
    covered_.insert(covered_.end(), modules.begin(), modules.end());
  }
  ~ValidatedScope() { covered_.resize(mark_); }
  C10_DISABLE_COPY_AND_ASSIGN(ValidatedScope);

  /// Whether an outer mha entry on this thread validated the inputs `module`
  /// is being called with.
  static bool covers(const torch::nn::Module* module) {
    return std::find(covered_.begin(), covered_.end(), module) != covered_.end();
  }

 private:
  size_t mark_;
  static inline thread_local std::vector<const torch::nn::Module*> covered_;
};

/// The modules of a stack's `layers`, for a `ValidatedScope`.
inline std::vector<const torch::nn::Module*> modules_of(const torch::nn::ModuleList& layers) {
  std::vector<const torch::nn::Module*> modules;
  for (const auto& layer : *layers) modules.push_back(layer.get());
  return modules;
}

/// The `Layer`s of `layers` and their attention modules `Layer::*attns`, for
/// the `ValidatedScope` of a stack step that checked every layer's calls.
template <typename Layer, typename... Attention>
std::vector<const torch::nn::Module*> checked_modules(const torch::nn::ModuleList& layers,
                                                      Attention Layer::*... attns) {
  std::vector<const torch::nn::Module*> modules = modules_of(layers);
  for (const auto& layer : *layers) {
    (modules.push_back((layer->as<Layer>()->*attns).get()), ...);
  }
  return modules;
}

}  // namespace detail
}  // namespace mha
