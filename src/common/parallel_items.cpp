#include "common/parallel_items.h"

#include <ATen/Parallel.h>
#include <ATen/ParallelFuture.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>

namespace mha {
namespace detail {

namespace {

/// A call's chunks, claimed one at a time by the calling thread and by the
/// tasks it launched; shared with those tasks, which may start after the call.
struct Chunks {
  std::function<void(int64_t)> run;
  int64_t count = 0;
  std::atomic<int64_t> next{0}, done{0};
  std::mutex mutex;
  std::condition_variable all_done;
  std::exception_ptr error;

  /// Runs chunks until none is left to claim.
  void work() {
    for (int64_t c = next++; c < count; c = next++) {
      try {
        run(c);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
      }
      if (++done == count) {
        const std::lock_guard<std::mutex> lock(mutex);
        all_done.notify_all();
      }
    }
  }
};

}  // namespace

void parallel_items(int64_t items,
                    const std::function<void(int64_t, int64_t)>& f,
                    int64_t chunks_per_thread) {
  const int64_t threads = std::min<int64_t>(at::get_num_threads(), items);
  if (threads <= 1 || at::in_parallel_region()) {
    f(0, items);
    return;
  }
  const int64_t count = std::min(items, threads * chunks_per_thread);
  auto chunks = std::make_shared<Chunks>();
  chunks->count = count;
  chunks->run = [&f, items, count](int64_t c) { f(items * c / count, items * (c + 1) / count); };
  for (int64_t t = 1; t < threads; ++t) at::launch([chunks] { chunks->work(); });
  chunks->work();
  std::unique_lock<std::mutex> lock(chunks->mutex);
  chunks->all_done.wait(lock, [&] { return chunks->done == chunks->count; });
  if (chunks->error) std::rethrow_exception(chunks->error);
}

}  // namespace detail
}  // namespace mha
