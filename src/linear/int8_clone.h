#pragma once

// Private: `clone()` of mha's modules when they hold int8 weights. LibTorch's
// `Cloneable::clone` re-runs `reset()`, which builds the float structure only
// (no int8 children), so such a module is cloned as: a new module from the
// same options, the original's int8 children mirrored into it path by path,
// then the original's archive (`torch::save`'s, int8 values included) loaded.

#include <torch/nn/module.h>
#include <torch/types.h>

#include <memory>
#include <optional>

#include "common/generator_state.h"
#include "linear/int8_linear.h"

namespace mha {
namespace detail {

/// Whether `module` or a module under it holds an int8 weight (`mha::quantize_dynamic`).
bool holds_int8(const torch::nn::Module& module);

/// Gives `copy` (built from `original`'s options: the same structure in float)
/// every int8 child `original` has, at the same path, each weight it replaces
/// made a placeholder as `mha::quantize_dynamic` leaves it; then loads
/// `original`'s archive into `copy` (every parameter, buffer and int8 value).
void copy_with_int8(const torch::nn::Module& original, torch::nn::Module& copy);

/// The `clone()` of mha's modules: LibTorch's deep copy, leaving the global
/// random stream alone (`clone_keeping_generator`); for a module holding
/// int8 weights, a new module from its options made equal by `copy_with_int8`.
template <typename Impl>
std::shared_ptr<torch::nn::Module> clone_module(const Impl& module,
                                                const std::optional<torch::Device>& device) {
  if (!holds_int8(module)) return clone_keeping_generator(module, device);
  const CpuGeneratorStateGuard keep_generator;  // the new module's init draws leave no trace
  auto copy = std::make_shared<Impl>(module.options);
  copy_with_int8(module, *copy);
  copy->train(module.is_training());
  if (device) copy->to(*device);  // int8 weights refuse any device but the CPU
  return copy;
}

}  // namespace detail
}  // namespace mha

/// Defines `Impl::load` (`load_checking_int8`) and `Impl::clone` (`clone_module`)
/// of an mha module class (in namespace mha), the same for every one of them.
#define MHA_DEFINE_LOAD_AND_CLONE(Impl)                                                      \
  void Impl::load(torch::serialize::InputArchive& archive) {                                 \
    detail::load_checking_int8(*this, archive);                                              \
  }                                                                                          \
  std::shared_ptr<torch::nn::Module> Impl::clone(const std::optional<torch::Device>& device) \
      const {                                                                                \
    return detail::clone_module(*this, device);                                              \
  }
