#pragma once

// Private: building modules whose random initial values are overwritten
// (clone(), a module made to receive converted weights) without drawing a
// random number, so that the global generator is left alone, also for
// other threads (Python's `copy.deepcopy` draws none).

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/macros/Macros.h>
#include <torch/nn/cloneable.h>
#include <torch/types.h>

#include <memory>
#include <optional>

namespace mha {
namespace detail {

/// While one lives, the in-place random fills this thread makes (`uniform_`,
/// `normal_`, `bernoulli_`, `random_`, `exponential_`, `cauchy_`,
/// `log_normal_`, `geometric_`: everything `torch::nn::init` and the
/// modules' `reset()` call) leave their tensors as they are and draw nothing;
/// other threads draw as usual. Only for tensors whose values are then
/// overwritten. `clone()` re-runs the copy's `reset()` before the original's
/// values are copied in: under this guard that draws nothing, so later seeded
/// inits stay Python's and another thread's draws are not disturbed.
///
/// It routes this thread's ops through the `CustomRNGKeyId` dispatch key, to
/// kernels that return `self` (registered once, at the first guard). Where
/// that registration fails (another library claimed the key), it saves the
/// default CPU generator's state and restores it at the end instead: the
/// draws leave no trace on this thread, but another thread drawing meanwhile
/// has its draws undone (`draws_intercepted()` says which).
class NoDrawsGuard {
 public:
  NoDrawsGuard();
  ~NoDrawsGuard();
  C10_DISABLE_COPY_AND_ASSIGN(NoDrawsGuard);

 private:
  std::optional<c10::impl::IncludeDispatchKeyGuard> intercept_;
  torch::Tensor saved_state_;  // the fallback's generator state
};

/// Whether `NoDrawsGuard` intercepts the draws (else it restores the state).
bool draws_intercepted();

/// `Cloneable<Impl>::clone(device)` under a `NoDrawsGuard`: the deep copy
/// LibTorch makes, without a random draw.
template <typename Impl>
std::shared_ptr<torch::nn::Module> clone_keeping_generator(
    const Impl& module, const std::optional<torch::Device>& device) {
  const NoDrawsGuard no_draws;
  return module.torch::nn::template Cloneable<Impl>::clone(device);
}

}  // namespace detail
}  // namespace mha
