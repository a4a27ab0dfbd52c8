#include "common/parallel_items.h"

#include <ATen/Parallel.h>
#include <ATen/ParallelFuture.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

namespace mha {
namespace detail {

namespace {

/// A call's chunks, claimed one at a time by the calling thread and by the
/// pool threads; shared with those threads, which may start after the call.
struct Chunks {
  std::function<void(int64_t)> run;
  int64_t count = 0;
  std::atomic<int64_t> next{0}, done{0};
  std::mutex mutex;
  std::condition_variable all_done;
  std::exception_ptr error;

  /// Whether a chunk is left to claim.
  bool open() const { return next.load() < count; }

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

/// How long a pool thread that ran chunks stays awake for the next call's, as
/// ONNX Runtime's pool spins: waking a sleeping thread costs about as much as
/// a 16-row GEMM's share (a MultiheadAttention(512, 8) call at 16 tokens on 2
/// threads took 0.89-0.93x the time with it; AVX2 EPYC). It yields while it
/// waits, so a busy machine's other threads run.
constexpr std::chrono::microseconds kAwakeFor{100};

/// The newest call's chunks, offered to the awake pool threads; `offers`
/// counts the offers, so a waiting thread reads one atomic until a new one comes.
struct Offer {
  std::mutex mutex;
  std::shared_ptr<Chunks> chunks;
  std::atomic<int64_t> offers{0}, awake_threads{0};

  void make(std::shared_ptr<Chunks> newest) {
    const std::lock_guard<std::mutex> lock(mutex);
    chunks = std::move(newest);
    ++offers;
  }
  std::shared_ptr<Chunks> take() {
    const std::lock_guard<std::mutex> lock(mutex);
    return chunks;
  }
};
/// The one offer, never destroyed: a pool thread may still wait on it at exit.
Offer& the_offer() {
  static Offer* const offer = new Offer();
  return *offer;
}

/// A pool thread's task: `chunks`, then those of each call offered while it is awake.
void serve(std::shared_ptr<Chunks> chunks) {
  Offer& offer = the_offer();
  int64_t seen = offer.offers.load();
  chunks->work();
  ++offer.awake_threads;
  auto until = std::chrono::steady_clock::now() + kAwakeFor;
  while (std::chrono::steady_clock::now() < until) {
    const int64_t offers = offer.offers.load();
    if (offers == seen) {
      std::this_thread::yield();
      continue;
    }
    seen = offers;
    std::shared_ptr<Chunks> offered = offer.take();
    if (!offered || !offered->open()) continue;
    --offer.awake_threads;
    chunks = std::move(offered);
    chunks->work();
    ++offer.awake_threads;
    until = std::chrono::steady_clock::now() + kAwakeFor;
  }
  --offer.awake_threads;
}

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
  // Awake threads take the chunks as offered; the others are launched. A
  // thread counted awake may go to sleep or to another caller's chunks
  // instead: the caller then claims more of them itself.
  the_offer().make(chunks);
  for (int64_t t = 1 + the_offer().awake_threads.load(); t < threads; ++t) {
    at::launch([chunks] { serve(chunks); });
  }
  chunks->work();
  // The chunks taken by other threads end soon: wait for them awake first, as
  // they wait for the next call's. Asleep on the condition variable the caller
  // waits for a futex wake and the scheduler too (2 threads: 0.85-0.96x the
  // time of a 16-token BERT-base or MultiheadAttention(512, 8) call; Zen 4,
  // bench/results/parallel-wait-2026-12-06-zen4.md).
  const auto until = std::chrono::steady_clock::now() + kAwakeFor;
  while (chunks->done.load() != chunks->count && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(chunks->mutex);
  chunks->all_done.wait(lock, [&] { return chunks->done == chunks->count; });
  if (chunks->error) std::rethrow_exception(chunks->error);
}

}  // namespace detail
}  // namespace mha
