#pragma once

// Private: large intermediate tensors reused within one call of a Transformer
// stack. Each layer allocates the same few large outputs (BERT-base at 32 x
// 128 tokens: the (4096, 2304) projection and the (4096, 3072) feed-forward,
// 38 and 50 MB). glibc maps a block over its mmap threshold (at most 32 MB)
// afresh, the kernel faults in and zeroes its pages at the first write, and
// the block is unmapped when freed: every layer paid again. An allocator
// that never maps (GLIBC_TUNABLES mmap and trim thresholds at 4 GB) took
// 2-5% off that call, and 5% off the panel GEMMs' time on 2 threads, where
// the faults serialize (bench/results/reused-buffers-2026-12-05-epyc.md).

#include <ATen/ATen.h>
#include <c10/macros/Macros.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace mha {
namespace detail {

/// Tensors of at least this many bytes come from a live `ReusedBuffers` scope.
constexpr size_t kReusedBufferBytes = size_t{1} << 20;

struct BufferPool;

/// While one lives on a thread (the outermost of nested ones), `empty_reused`
/// there hands out blocks freed during its life again, by exact byte size;
/// when it ends, the blocks not in use are freed, and those in use when their
/// tensors are. Tensors keep their storage's usual behaviour (resizable, any
/// thread may free them).
class ReusedBuffers {
 public:
  ReusedBuffers();
  ~ReusedBuffers();
  C10_DISABLE_COPY_AND_ASSIGN(ReusedBuffers);

  /// How many blocks this thread's live scope has handed out again (0 without one).
  static int64_t reuses();

 private:
  std::shared_ptr<BufferPool> pool_;  // null in a nested scope
};

/// `at::empty(sizes, options)`, contiguous; on the CPU at kReusedBufferBytes
/// and more, a block of this thread's live `ReusedBuffers` scope.
at::Tensor empty_reused(at::IntArrayRef sizes, const at::TensorOptions& options);

}  // namespace detail
}  // namespace mha
