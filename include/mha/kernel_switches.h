#pragma once

// The process's kernel switches: Python's fast-path switch and mha's switch
// for Python's exact kernels, with their scope guards.

#include <optional>

namespace mha {

/// Python's `torch.backends.mha.set_fastpath_enabled`: when false, the native
/// fused inference path (`at::_native_multi_head_attention`) is never taken.
void set_fastpath_enabled(bool enabled);

/// Python's `torch.backends.mha.get_fastpath_enabled` (default true): the
/// calling thread's setting (a live `FastPathGuard` of this thread, else the
/// process-wide one).
bool get_fastpath_enabled();

/// Sets the fast-path switch to `enabled` for the calls of this thread while
/// it lives (like `c10::InferenceMode`): other threads keep the process-wide
/// setting, and `get_fastpath_enabled()` answers each thread's own. Guards nest.
///
/// Example:
/// ```
/// {
///   mha::FastPathGuard slow_path(false);  // Python's functional path only
/// }                                       // the previous setting again
/// ```
class FastPathGuard {
 public:
  /// Remembers this thread's setting, then sets `enabled` for this thread.
  explicit FastPathGuard(bool enabled);
  /// Restores this thread's setting remembered at construction.
  ~FastPathGuard();
  FastPathGuard(const FastPathGuard&) = delete;
  FastPathGuard& operator=(const FastPathGuard&) = delete;

 private:
  std::optional<bool> previous_;  // this thread's guard setting before, if any
};

/// Python's exact kernels: while enabled, every call of mha's modules and
/// layers runs the ATen kernel Python's module runs for that call (Python's
/// native op where Python takes its fast path, its functional steps
/// elsewhere), so outputs are bitwise Python's at the same thread count; mha's
/// own faster kernels (docs/semantics.md, "Fast path") are not used. Off by
/// default. Process-wide, like `set_fastpath_enabled` (Python's switches are
/// process-wide too): it affects every thread without a `PythonKernelsGuard`.
/// `forward_cached` has no Python counterpart and is not affected.
void set_python_kernels(bool enabled);

/// Whether Python's kernels are in effect for the calling thread (a live
/// `PythonKernelsGuard` of this thread, else `set_python_kernels`; default false).
bool python_kernels_enabled();

/// Python's kernels on (or off) for the calls of this thread while it lives,
/// like `c10::InferenceMode`: other threads keep the process-wide setting.
/// Guards nest.
///
/// Example:
/// ```
/// {
///   mha::PythonKernelsGuard exact;  // Python's bits for these calls
///   auto [out, weights] = attn(x, x, x);
/// }
/// ```
class PythonKernelsGuard {
 public:
  /// Remembers this thread's setting, then sets `enabled` for this thread.
  explicit PythonKernelsGuard(bool enabled = true);
  /// Restores this thread's setting remembered at construction.
  ~PythonKernelsGuard();
  PythonKernelsGuard(const PythonKernelsGuard&) = delete;
  PythonKernelsGuard& operator=(const PythonKernelsGuard&) = delete;

 private:
  std::optional<bool> previous_;  // this thread's guard setting before, if any
};

}  // namespace mha
