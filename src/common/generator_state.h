#pragma once

// Private: keeping ATen's default CPU generator as it was, so that cloning a
// module draws no random numbers (Python's `copy.deepcopy` draws none).

#include <torch/nn/cloneable.h>
#include <torch/types.h>

#include <memory>
#include <optional>

namespace mha {
namespace detail {

/// Keeps ATen's default CPU generator state across a scope. `clone()` re-runs
/// the cloned module's `reset()`, which draws initial values before the
/// original's are copied in; under this guard those draws leave no trace, so
/// later seeded inits stay Python's. Another thread drawing from the default
/// generator during the scope has its draws undone too.
class CpuGeneratorStateGuard {
 public:
  CpuGeneratorStateGuard();
  ~CpuGeneratorStateGuard();
  CpuGeneratorStateGuard(const CpuGeneratorStateGuard&) = delete;
  CpuGeneratorStateGuard& operator=(const CpuGeneratorStateGuard&) = delete;

 private:
  torch::Tensor state_;
};

/// `Cloneable<Impl>::clone(device)` under a `CpuGeneratorStateGuard`: the deep
/// copy LibTorch makes, without moving the global RNG.
template <typename Impl>
std::shared_ptr<torch::nn::Module> clone_keeping_generator(
    const Impl& module, const std::optional<torch::Device>& device) {
  const CpuGeneratorStateGuard keep_generator;
  return module.torch::nn::template Cloneable<Impl>::clone(device);
}

}  // namespace detail
}  // namespace mha
