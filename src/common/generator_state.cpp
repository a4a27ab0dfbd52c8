#include "common/generator_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <mutex>

namespace mha {
namespace detail {

namespace {

/// The kernel of every intercepted fill: drops the arguments, returns `self`.
void leave_self(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t num_args = op.schema().arguments().size();
  at::Tensor self = (*stack)[stack->size() - num_args].toTensor();
  torch::jit::drop(*stack, num_args);
  torch::jit::push(*stack, std::move(self));
}

/// Every other op under `CustomRNGKeyId`: the same call without the key. (A
/// fallthrough is not enough: kernels that compute their key set themselves,
/// as quantized factories do, would run it.)
void without_the_key(const c10::OperatorHandle& op,
                     c10::DispatchKeySet keys,
                     torch::jit::Stack* stack) {
  op.redispatchBoxed(keys.remove(c10::DispatchKey::CustomRNGKeyId), stack);
}

/// Registers, once, `without_the_key` for every op under `CustomRNGKeyId` and
/// `leave_self` for the in-place random fills; false if the dispatcher
/// refused (the key's fallback or kernels registered elsewhere).
bool register_interception() {
  try {
    // Never destroyed: the registrations last as long as the process.
    static auto* const all_ops = [] {
      auto* library = new torch::Library(torch::Library::IMPL, "_",
                                         c10::DispatchKey::CustomRNGKeyId, __FILE__, __LINE__);
      library->fallback(torch::CppFunction::makeFromBoxedFunction<&without_the_key>());
      return library;
    }();
    static auto* const fills = [] {
      auto* library = new torch::Library(torch::Library::IMPL, "aten",
                                         c10::DispatchKey::CustomRNGKeyId, __FILE__, __LINE__);
      for (const char* op :
           {"uniform_", "normal_", "bernoulli_.Tensor", "bernoulli_.float", "random_",
            "random_.from", "random_.to", "exponential_", "cauchy_", "log_normal_", "geometric_"}) {
        library->impl(op, torch::CppFunction::makeFromBoxedFunction<&leave_self>());
      }
      return library;
    }();
    return all_ops != nullptr && fills != nullptr;
  } catch (const c10::Error&) {
    return false;
  }
}

}  // namespace

bool draws_intercepted() {
  static const bool intercepted = register_interception();
  return intercepted;
}

NoDrawsGuard::NoDrawsGuard() {
  if (draws_intercepted()) {
    intercept_.emplace(c10::DispatchKey::CustomRNGKeyId);
    return;
  }
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  saved_state_ = generator.get_state();
}

NoDrawsGuard::~NoDrawsGuard() {
  if (intercept_) return;
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(saved_state_);
}

}  // namespace detail
}  // namespace mha
