#pragma once

// Private: small ATen ops kept on the calling thread. With
// OMP_WAIT_POLICY=PASSIVE, LibTorch's OpenMP workers sleep between parallel
// regions, and a region wakes them: 50-80 us on a 2-core VM, more than one
// thread takes for a layer norm of 100 rows of 768 (measured: (64, 768) 76 us
// in a region, 26 us on the calling thread; (512, 768) 191 vs 172 us). With
// spinning workers (the default policy) a region costs a few us, so nothing
// changes then.

#include <cstdint>

namespace mha {
namespace detail {

/// Tensors of at most this many elements are small: one thread computes a
/// layer norm of them, or an attention over them, faster than a sleeping
/// worker wakes.
constexpr int64_t kCallingThreadElements = int64_t{1} << 17;

/// GEMMs of fewer multiply-adds are small: one thread computes them faster
/// than a sleeping worker wakes (a (1, 512) x (512, 1536) call: 0.21 ms on
/// the calling thread, 0.27 ms waking a second one, PASSIVE, 2-core Xeon).
constexpr int64_t kCallingThreadMultiplyAdds = int64_t{1} << 20;

/// The thread counts `enter_calling_thread` replaced: OpenMP's (0: nothing
/// replaced) and MKL's thread-local one (0: none was set).
struct CallingThreadCounts {
  int openmp = 0, mkl = 0;
};

/// Sets this thread's OpenMP thread count (nthreads-var) and MKL's
/// thread-local count to 1 when the op is small (`work` <= `small_work`), the
/// workers sleep (OMP_WAIT_POLICY is PASSIVE) and there are workers to wake;
/// returns the counts to restore. Other threads are not affected.
/// `omp_set_num_threads` and `mkl_set_num_threads_local` are looked up at run
/// time in the runtimes LibTorch loaded (mha links neither); without OpenMP
/// nothing changes, without MKL only OpenMP's count.
CallingThreadCounts enter_calling_thread(int64_t work, int64_t small_work = kCallingThreadElements);

/// Restores the counts `enter_calling_thread` returned.
void leave_calling_thread(const CallingThreadCounts& previous);

/// `op()`, its ATen ops on this thread alone where `enter_calling_thread` says so.
template <typename Op>
auto on_calling_thread_if_small(int64_t work,
                                Op&& op,
                                int64_t small_work = kCallingThreadElements) {
  struct Restore {
    CallingThreadCounts previous;
    ~Restore() { leave_calling_thread(previous); }
  } restore{enter_calling_thread(work, small_work)};
  return op();
}

}  // namespace detail
}  // namespace mha
