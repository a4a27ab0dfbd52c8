#include "mha/kernel_switches.h"

#include <atomic>

namespace mha {

namespace {

std::atomic<bool> fastpath_enabled{true};
std::atomic<bool> python_kernels{false};

}  // namespace

void set_fastpath_enabled(bool enabled) { fastpath_enabled.store(enabled); }

bool get_fastpath_enabled() { return fastpath_enabled.load(); }

FastPathGuard::FastPathGuard(bool enabled) : previous_(fastpath_enabled.exchange(enabled)) {}

FastPathGuard::~FastPathGuard() { fastpath_enabled.store(previous_); }

void set_python_kernels(bool enabled) { python_kernels.store(enabled); }

bool python_kernels_enabled() { return python_kernels.load(); }

PythonKernelsGuard::PythonKernelsGuard(bool enabled)
    : previous_(python_kernels.exchange(enabled)) {}

PythonKernelsGuard::~PythonKernelsGuard() { python_kernels.store(previous_); }

}  // namespace mha
