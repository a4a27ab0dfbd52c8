#include "common/generator_state.h"

#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

namespace mha {
namespace detail {

CpuGeneratorStateGuard::CpuGeneratorStateGuard() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  state_ = generator.get_state();
}

CpuGeneratorStateGuard::~CpuGeneratorStateGuard() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state_);
}

}  // namespace detail
}  // namespace mha
