#include "common/calling_thread.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <strings.h>

#include <cstdlib>

namespace mha {
namespace detail {
namespace {

/// The OpenMP runtime's `omp_set_num_threads`, where LibTorch loaded one; else null.
using SetNumThreads = void (*)(int);
SetNumThreads omp_set_num_threads() {
  static const auto set =
      reinterpret_cast<SetNumThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  return set;
}

/// Whether OMP_WAIT_POLICY asks the workers to sleep (read at each guard, as tests set it).
bool workers_sleep() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  return policy != nullptr && strcasecmp(policy, "passive") == 0;
}

}  // namespace

int enter_calling_thread(int64_t work, int64_t small_work) {
  if (work > small_work || !workers_sleep() || omp_set_num_threads() == nullptr) {
    return 0;
  }
  // at::get_num_threads first: on a thread's first call ATen sets its count.
  const int threads = at::get_num_threads();
  if (threads <= 1) return 0;
  omp_set_num_threads()(1);
  return threads;
}

void leave_calling_thread(int previous) {
  if (previous > 0) omp_set_num_threads()(previous);
}

}  // namespace detail
}  // namespace mha
