#pragma once

// Private: validation once per call. The outermost mha entry a user calls (a
// Transformer, a stack, a layer, the attention module) checks every input
// with its own argument names (src, tgt, memory, query, ...), then holds a
// `ValidatedScope` while it computes; the mha entries it calls in turn (the
// stack's layers, a layer's attention) see the scope and skip their checks.

namespace mha {
namespace detail {

/// Marks this thread's current mha call as validated for as long as it lives.
class ValidatedScope {
 public:
  ValidatedScope() : outer_(active_) { active_ = true; }
  ~ValidatedScope() { active_ = outer_; }
  ValidatedScope(const ValidatedScope&) = delete;
  ValidatedScope& operator=(const ValidatedScope&) = delete;

  /// Whether an outer mha entry on this thread has validated the inputs.
  static bool active() { return active_; }

 private:
  bool outer_;
  static inline thread_local bool active_ = false;
};

}  // namespace detail
}  // namespace mha
