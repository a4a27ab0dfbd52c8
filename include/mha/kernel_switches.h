#pragma once

// The process's kernel switches: Python's fast-path switch and mha's switch
// for Python's exact kernels, with their scope guards.

namespace mha {

/// Python's `torch.backends.mha.set_fastpath_enabled`: when false, the native
/// fused inference path (`at::_native_multi_head_attention`) is never taken.
void set_fastpath_enabled(bool enabled);

/// Python's `torch.backends.mha.get_fastpath_enabled` (default true).
bool get_fastpath_enabled();

/// Sets `set_fastpath_enabled(enabled)` for a scope and restores the previous
/// value when it ends. The switch is process-wide (as Python's is), so the
/// guard affects every thread while it lives.
///
/// Example:
/// ```
/// {
///   mha::FastPathGuard slow_path(false);  // Python's functional path only
/// }                                       // the previous setting again
/// ```
class FastPathGuard {
 public:
  /// Remembers the current setting, then sets `enabled`.
  explicit FastPathGuard(bool enabled);
  /// Restores the setting remembered at construction.
  ~FastPathGuard();
  FastPathGuard(const FastPathGuard&) = delete;
  FastPathGuard& operator=(const FastPathGuard&) = delete;

 private:
  bool previous_;
};

/// Python's exact kernels: while enabled, every call of mha's modules and
/// layers runs the ATen kernel Python's module runs for that call (Python's
/// native op where Python takes its fast path, its functional steps
/// elsewhere), so outputs are bitwise Python's at the same thread count; mha's
/// own faster kernels (docs/semantics.md, "Fast path") are not used. Off by
/// default. Process-wide, like `set_fastpath_enabled` (Python's switches are
/// process-wide too): it affects every thread. `forward_cached` has no Python
/// counterpart and is not affected.
void set_python_kernels(bool enabled);

/// Whether `set_python_kernels(true)` is in effect (default false).
bool python_kernels_enabled();

/// Sets `set_python_kernels(enabled)` for a scope and restores the previous
/// value when it ends (process-wide, as the switch is).
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
  /// Remembers the current setting, then sets `enabled`.
  explicit PythonKernelsGuard(bool enabled = true);
  /// Restores the setting remembered at construction.
  ~PythonKernelsGuard();
  PythonKernelsGuard(const PythonKernelsGuard&) = delete;
  PythonKernelsGuard& operator=(const PythonKernelsGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace mha
