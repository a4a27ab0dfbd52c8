#include "common/calling_thread.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <strings.h>

#include <cstdlib>

namespace mha {
namespace detail {
namespace {

/// The function `name` of type Fn in a runtime LibTorch loaded, or null.
template <typename Fn>
Fn runtime_function(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

/// The OpenMP runtime's `omp_set_num_threads`, where LibTorch loaded one; else null.
using SetNumThreads = void (*)(int);
SetNumThreads omp_set_num_threads() {
  static const auto set = runtime_function<SetNumThreads>("omp_set_num_threads");
  return set;
}

/// MKL's `mkl_set_num_threads_local` (its C entry, by value; the lower-case
/// symbol is the Fortran one, by reference), where LibTorch carries MKL; else
/// null. MKL keeps a count of its own for each thread (why: docs/semantics.md,
/// the calling thread).
using SetMklThreads = int (*)(int);
SetMklThreads mkl_set_num_threads_local() {
  static const auto set = runtime_function<SetMklThreads>("MKL_Set_Num_Threads_Local");
  return set;
}

/// Whether OMP_WAIT_POLICY asks the workers to sleep (read at each guard, as tests set it).
bool workers_sleep() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  return policy != nullptr && strcasecmp(policy, "passive") == 0;
}

}  // namespace

CallingThreadCounts enter_calling_thread(int64_t work, int64_t small_work) {
  if (work > small_work || !workers_sleep() || omp_set_num_threads() == nullptr) {
    return {};
  }
  // at::get_num_threads first: on a thread's first call ATen sets its count.
  const int threads = at::get_num_threads();
  if (threads <= 1) return {};
  omp_set_num_threads()(1);
  const int mkl = mkl_set_num_threads_local() != nullptr ? mkl_set_num_threads_local()(1) : 0;
  return {threads, mkl};
}

void leave_calling_thread(const CallingThreadCounts& previous) {
  if (previous.openmp == 0) return;
  omp_set_num_threads()(previous.openmp);
  // 0 puts MKL back on its global count, as before the guard where none was set
  if (mkl_set_num_threads_local() != nullptr) mkl_set_num_threads_local()(previous.mkl);
}

}  // namespace detail
}  // namespace mha
