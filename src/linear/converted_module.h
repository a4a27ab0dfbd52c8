#pragma once

// Private: `torch::load` and `clone()` of mha's modules when they hold
// converted weights (int8 or prepacked, linear/weight_form.h). LibTorch's
// `Cloneable::clone` re-runs `reset()`, which builds the float structure only
// (no converted children), so such a module is cloned as: a new module from
// the same options, the original's converted children mirrored into it path
// by path, then the original's archive (`torch::save`'s, converted weights
// included) loaded.

#include <torch/nn/module.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <memory>
#include <optional>

#include "common/generator_state.h"
#include "mha/convertible_module.h"

namespace mha {
namespace detail {

/// Whether `module` or a module under it holds an int8 weight (`mha::quantize_dynamic`).
bool holds_int8(const torch::nn::Module& module);

/// Whether `module` or a module under it holds a prepacked weight (`mha::prepack`).
bool holds_prepacked(const torch::nn::Module& module);

/// Gives `copy` (built from `original`'s options: the same structure in float)
/// every converted child `original` has, at the same path, each weight it
/// replaces made a placeholder as the conversion leaves it; then loads
/// `original`'s archive into `copy` (every parameter, buffer and converted weight).
void copy_with_converted_weights(const torch::nn::Module& original, torch::nn::Module& copy);

/// The override of `load` of mha's modules: throws a c10::Error, before
/// anything loads, when the archive's converted weights (`<param>_int8`,
/// `<param>_packed` children) do not match `module`'s own, in it or in any
/// module under it (a float weight archived where `module` holds a converted
/// one, or the reverse, or another kind or shape); then LibTorch's `Module::load`.
void load_checking_converted(torch::nn::Module& module, torch::serialize::InputArchive& archive);

/// The `clone()` of mha's modules: LibTorch's deep copy, leaving the random
/// streams alone (`clone_keeping_generator`); for a module holding converted
/// weights, a new module from its options made equal by `copy_with_converted_weights`.
template <typename Impl>
std::shared_ptr<torch::nn::Module> clone_module(const Impl& module,
                                                const std::optional<torch::Device>& device) {
  if (!holds_int8(module) && !holds_prepacked(module)) {
    return clone_keeping_generator(module, device);
  }
  auto copy = [&] {
    const NoDrawsGuard no_draws;  // its init is overwritten: no draws
    return std::make_shared<Impl>(module.options);
  }();
  copy_with_converted_weights(module, *copy);
  copy->train(module.is_training());
  if (device) copy->to(*device);  // converted weights refuse any device but the CPU
  return copy;
}

/// `ConvertibleModule`'s `load` (`load_checking_converted`), for the class that
/// instantiates it (`template class detail::ConvertibleModule<Impl>;` in its .cpp).
template <typename Derived>
void ConvertibleModule<Derived>::load(torch::serialize::InputArchive& archive) {
  load_checking_converted(*this, archive);
  tie_weights();
}

/// `ConvertibleModule`'s `clone` (`clone_module`).
template <typename Derived>
std::shared_ptr<torch::nn::Module> ConvertibleModule<Derived>::clone(
    const std::optional<torch::Device>& device) const {
  auto copy = clone_module(static_cast<const Derived&>(*this), device);
  static_cast<ConvertibleModule&>(static_cast<Derived&>(*copy)).tie_weights();
  return copy;
}

}  // namespace detail
}  // namespace mha
