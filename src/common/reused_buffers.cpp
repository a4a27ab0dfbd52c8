#include "common/reused_buffers.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace mha {
namespace detail {

/// A scope's freed blocks, kept for reuse while it is open.
struct BufferPool {
  /// One block of memory and the pool it returns to.
  struct Block {
    std::shared_ptr<BufferPool> pool;
    void* data;
    size_t bytes;
  };

  static void release(Block* block) {
    c10::free_cpu(block->data);
    delete block;
  }

  std::mutex mutex;
  std::vector<Block*> idle;
  bool open = true;
  int64_t reuses = 0;

  /// A freed block of exactly `bytes`, or a new one.
  Block* take(const std::shared_ptr<BufferPool>& self, size_t bytes) {
    {
      const std::lock_guard<std::mutex> lock(mutex);
      const auto it = std::find_if(idle.begin(), idle.end(),
                                   [bytes](const Block* b) { return b->bytes == bytes; });
      if (it != idle.end()) {
        Block* block = *it;
        idle.erase(it);
        ++reuses;
        return block;
      }
    }
    return new Block{self, c10::alloc_cpu(bytes), bytes};
  }

  /// Keeps `block` for reuse while open, else frees it.
  void give_back(Block* block) {
    {
      const std::lock_guard<std::mutex> lock(mutex);
      if (open) {
        idle.push_back(block);
        return;
      }
    }
    release(block);
  }

  /// Frees the idle blocks; blocks in use are freed when given back.
  void close() {
    std::vector<Block*> blocks;
    {
      const std::lock_guard<std::mutex> lock(mutex);
      open = false;
      blocks.swap(idle);  // each holds this pool: the cycle ends here
    }
    for (Block* block : blocks) release(block);
  }
};

namespace {

thread_local std::shared_ptr<BufferPool> live_pool;  // this thread's outermost scope's

/// The DataPtr's deleter: the block back to its pool.
void give_back_block(void* context) {
  auto* block = static_cast<BufferPool::Block*>(context);
  const std::shared_ptr<BufferPool> pool = block->pool;  // alive through give_back
  c10::reportMemoryUsageToProfiler(block->data, -static_cast<int64_t>(block->bytes), 0, 0,
                                   c10::Device(c10::kCPU));
  pool->give_back(block);
}

}  // namespace

ReusedBuffers::ReusedBuffers() {
  if (!live_pool) {
    pool_ = std::make_shared<BufferPool>();
    live_pool = pool_;
  }
}

ReusedBuffers::~ReusedBuffers() {
  if (!pool_) return;
  live_pool.reset();
  pool_->close();
}

int64_t ReusedBuffers::reuses() {
  if (!live_pool) return 0;
  const std::lock_guard<std::mutex> lock(live_pool->mutex);
  return live_pool->reuses;
}

at::Tensor empty_reused(at::IntArrayRef sizes, const at::TensorOptions& options) {
  const size_t bytes =
      static_cast<size_t>(c10::multiply_integers(sizes)) * options.dtype().itemsize();
  if (!live_pool || bytes < kReusedBufferBytes || options.device().type() != c10::kCPU) {
    return at::empty(sizes, options);
  }
  BufferPool::Block* block = live_pool->take(live_pool, bytes);
  c10::reportMemoryUsageToProfiler(block->data, static_cast<int64_t>(bytes), 0, 0,
                                   c10::Device(c10::kCPU));
  c10::Storage storage(c10::Storage::use_byte_size_t(), bytes,
                       c10::DataPtr(block->data, block, &give_back_block, c10::Device(c10::kCPU)),
                       c10::GetCPUAllocator(), /*resizable=*/true);
  return at::empty({0}, options).set_(std::move(storage), 0, sizes);
}

}  // namespace detail
}  // namespace mha
