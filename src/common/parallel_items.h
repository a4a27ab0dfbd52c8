#pragma once

// Private: mha's own kernels' threads. LibTorch's at::parallel_for runs OpenMP
// pragmas compiled into the caller, and mha is built without OpenMP (one
// OpenMP runtime per process: LibTorch's), so the work goes to LibTorch's
// inter-op pool (at::launch) instead; a pool thread stays awake a moment after
// its chunks (100 us, yielding) and takes the next call's without a wake-up.

#include <cstdint>
#include <functional>

namespace mha {
namespace detail {

/// f(begin, end) over [0, items) in `chunks_per_thread` x at::get_num_threads()
/// chunks, at most `items` (one call of f(0, items) on one thread or inside a
/// parallel region). The caller works too, claiming chunks as the pool's
/// threads do, so a thread that wakes late takes fewer; it waits only for
/// chunks already taken, so a pool busy with callers of this function cannot
/// deadlock it; it waits awake (yielding) for up to 100 us, then asleep.
/// The first exception is rethrown.
void parallel_items(int64_t items,
                    const std::function<void(int64_t, int64_t)>& f,
                    int64_t chunks_per_thread = 1);

}  // namespace detail
}  // namespace mha
