#include "mha/kernel_switches.h"

#include <atomic>

namespace mha {

namespace {

// The process-wide settings, and each thread's guard setting (unset: none alive).
std::atomic<bool> fastpath_enabled{true};
std::atomic<bool> python_kernels{false};
thread_local std::optional<bool> fastpath_guarded;
thread_local std::optional<bool> python_kernels_guarded;

}  // namespace

void set_fastpath_enabled(bool enabled) { fastpath_enabled.store(enabled); }

bool get_fastpath_enabled() { return fastpath_guarded.value_or(fastpath_enabled.load()); }

FastPathGuard::FastPathGuard(bool enabled) : previous_(fastpath_guarded) {
  fastpath_guarded = enabled;
}

FastPathGuard::~FastPathGuard() { fastpath_guarded = previous_; }

void set_python_kernels(bool enabled) { python_kernels.store(enabled); }

bool python_kernels_enabled() { return python_kernels_guarded.value_or(python_kernels.load()); }

PythonKernelsGuard::PythonKernelsGuard(bool enabled) : previous_(python_kernels_guarded) {
  python_kernels_guarded = enabled;
}

PythonKernelsGuard::~PythonKernelsGuard() { python_kernels_guarded = previous_; }

}  // namespace mha
