#pragma once

// The base of mha's module classes: LibTorch's `Cloneable`, with the `load`
// and `clone` that keep a module's converted weights (`mha::quantize_dynamic`'s
// int8, `mha::prepack`'s panels) and leave the global RNG alone, written once
// for every class; and the base of the whole Hugging Face models, whose `to`
// unpacks prepacked weights first.

#include <torch/nn/cloneable.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace mha {
namespace detail {

/// `torch::nn::Cloneable<Derived>` with mha's `load` and `clone`. The base of
/// mha's module classes; its members are defined in the library for those
/// classes only.
template <typename Derived>
class ConvertibleModule : public torch::nn::Cloneable<Derived> {
 public:
  ConvertibleModule() = default;
  /// A module named `name` (`Module::name()`).
  explicit ConvertibleModule(std::string name) : torch::nn::Cloneable<Derived>(std::move(name)) {}

  /// `torch::load`'s step: a c10::Error before anything loads when the
  /// archive's converted weights (int8, prepacked) do not match this module's,
  /// then LibTorch's load (converted weights included); a tied head is tied again.
  void load(torch::serialize::InputArchive& archive) override;

  /// A deep copy, as `Cloneable::clone`, converted weights included, that
  /// leaves the global RNG as it was (the copy's `reset()` draws, then the
  /// original's values replace them), as Python's `copy.deepcopy` does; a tied
  /// head stays tied.
  std::shared_ptr<torch::nn::Module> clone(
      const std::optional<torch::Device>& device = std::nullopt) const override;

 protected:
  /// Ties what the module ties (an LM head to its input embeddings) again,
  /// after a step that gave every parameter its own storage; by default nothing.
  virtual void tie_weights() {}
};

/// `ConvertibleModule` with `Module::to` overridden: the base of the whole
/// Hugging Face models (`load_hf_model`), whose prepacked weights (its
/// default) are unpacked first (`mha::unpack`) when the dtype or device
/// changes, and whose tied head is tied again after.
template <typename Derived>
class WholeModel : public ConvertibleModule<Derived> {
 public:
  using ConvertibleModule<Derived>::ConvertibleModule;

  /// `Module::to`, prepacked weights unpacked first where they cannot follow.
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  /// See the overload above.
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  /// See the overload above.
  void to(torch::Device device, bool non_blocking = false) override;
};

}  // namespace detail
}  // namespace mha
