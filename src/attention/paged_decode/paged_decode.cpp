// The paged decode kernel's entry: the arguments checked, the capability
// chosen from this CPU's features, the output allocated.

#include "attention/paged_decode/paged_decode.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

/// Whether this CPU runs code built for `capability`.
bool cpu_runs(CpuCapability capability) {
#if defined(MHA_PAGED_DECODE_X86)
  switch (capability) {
    case CpuCapability::kDefault:
      return true;
    case CpuCapability::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CpuCapability::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }
  return false;
#else
  return capability == CpuCapability::kDefault;
#endif
}

/// Throws unless the pools, query, table and lengths agree (names the argument).
void check_args(const PagedDecodeArgs& a) {
  const Tensor& q = a.query;
  TORCH_CHECK_VALUE(q.dim() == 3 && q.stride(2) == 1,
                    "paged decode: expected query (N, H, hd) with contiguous rows, but got sizes ",
                    q.sizes(), " and strides ", q.strides());
  TORCH_CHECK_VALUE(decode_kernel_reads(q),
                    "paged decode: expected a float32 or bfloat16 CPU query, but got ",
                    q.scalar_type(), " on ", q.device());
  for (const Tensor* pool : {&a.keys, &a.values}) {
    TORCH_CHECK_VALUE(pool->dim() == 4 && pool->stride(3) == 1 && pool->size(2) == q.size(1) &&
                          pool->size(3) == q.size(2) && pool->size(1) > 0 &&
                          pool->sizes() == a.keys.sizes() && pool->scalar_type() == q.scalar_type(),
                      "paged decode: expected keys and values (blocks, block_size, ", q.size(1),
                      ", ", q.size(2), ") of ", q.scalar_type(), " with contiguous rows, but got ",
                      pool->sizes(), " of ", pool->scalar_type(), " with strides ",
                      pool->strides());
  }
  TORCH_CHECK_VALUE(a.block_table.dim() == 2 && a.block_table.size(0) == q.size(0) &&
                        a.block_table.scalar_type() == at::kInt && a.block_table.stride(1) == 1,
                    "paged decode: expected block_table (", q.size(0),
                    ", max_blocks) int32 with contiguous rows, but got ", a.block_table.sizes(),
                    " of ", a.block_table.scalar_type());
  TORCH_CHECK_VALUE(a.lengths.dim() == 1 && a.lengths.size(0) == q.size(0) &&
                        a.lengths.scalar_type() == at::kInt && a.lengths.is_contiguous(),
                    "paged decode: expected lengths (", q.size(0), ",) int32, but got ",
                    a.lengths.sizes(), " of ", a.lengths.scalar_type());
}

/// Throws unless every block a sequence reads is in the table and the pool.
void check_blocks(const PagedDecodeArgs& a) {
  const int64_t pool_blocks = a.keys.size(0), block_size = a.keys.size(1);
  const int32_t* lengths = a.lengths.data_ptr<int32_t>();
  for (int64_t n = 0; n < a.query.size(0); ++n) {
    const int64_t used =
        a.table_per_position ? lengths[n] : (lengths[n] + block_size - 1) / block_size;
    const int64_t most = a.table_per_position ? std::min(a.block_table.size(1), block_size)
                                              : a.block_table.size(1) * block_size;
    TORCH_CHECK_VALUE(lengths[n] >= 0 && lengths[n] <= most, "paged decode: expected lengths[", n,
                      "] in [0, ", most, "], but got ", lengths[n]);
    const int32_t* row = a.block_table.data_ptr<int32_t>() + n * a.block_table.stride(0);
    for (int64_t b = 0; b < used; ++b) {
      TORCH_CHECK_VALUE(row[b] >= 0 && row[b] < pool_blocks, "paged decode: expected block_table[",
                        n, "][", b, "] in [0, ", pool_blocks, "), but got ", row[b]);
    }
  }
}

/// The items of a call of `batch` sequences of `heads` heads on `threads`
/// threads: all heads per item when there are enough sequences (each pool row
/// read whole), else groups of heads, halved until every thread has two.
DecodeItems decode_items(int64_t batch, int64_t heads, int64_t threads) {
  int64_t groups = 1;
  while (groups < heads && batch * groups < 2 * threads) groups *= 2;
  DecodeItems items;
  items.heads = (heads + groups - 1) / groups;
  items.per_sequence = (heads + items.heads - 1) / items.heads;
  return items;
}

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

/// f(begin, end) over [0, items) in at::get_num_threads() chunks. LibTorch's
/// at::parallel_for runs OpenMP pragmas compiled into the caller, and mha is
/// built without OpenMP (one OpenMP runtime per process: LibTorch's), so the
/// chunks go to LibTorch's inter-op pool (at::launch); the caller works too,
/// and waits only for chunks already taken, so a pool busy with callers of
/// this function cannot deadlock it.
void parallel_items(int64_t items, const std::function<void(int64_t, int64_t)>& f) {
  const int64_t threads = std::min<int64_t>(at::get_num_threads(), items);
  if (threads <= 1 || at::in_parallel_region()) {
    f(0, items);
    return;
  }
  auto chunks = std::make_shared<Chunks>();
  chunks->count = threads;
  chunks->run = [&f, items, threads](int64_t c) {
    f(items * c / threads, items * (c + 1) / threads);
  };
  for (int64_t t = 1; t < threads; ++t) at::launch([chunks] { chunks->work(); });
  chunks->work();
  std::unique_lock<std::mutex> lock(chunks->mutex);
  chunks->all_done.wait(lock, [&] { return chunks->done == chunks->count; });
  if (chunks->error) std::rethrow_exception(chunks->error);
}

}  // namespace

bool decode_kernel_reads(const Tensor& t) {
  return t.device().is_cpu() && (t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16);
}

PagedDecodeArgs dense_blocks(const Tensor& query,
                             const Tensor& keys,
                             const Tensor& values,
                             const Tensor& rows) {
  const int64_t n = query.size(0), length = keys.size(2);
  const bool per_position = rows.defined() && rows.dim() == 2;
  const Tensor table = per_position     ? rows.narrow(1, 0, length)  // position j: rows[i][j]
                       : rows.defined() ? rows.view({n, 1})          // sequence i: rows[i]
                                        : at::arange(n, at::kInt).unsqueeze(1);  // block i
  return {query,
          keys.transpose(1, 2),
          values.transpose(1, 2),  // (R, S, H, hd) views
          table,
          at::full({n}, length, at::kInt),
          per_position};
}

std::vector<CpuCapability> available_cpu_capabilities() {
  std::vector<CpuCapability> available;
  for (CpuCapability c : {CpuCapability::kDefault, CpuCapability::kAvx2, CpuCapability::kAvx512}) {
    if (cpu_runs(c)) available.push_back(c);
  }
  return available;
}

const char* capability_name(CpuCapability capability) {
  static constexpr const char* kNames[] = {"default", "avx2", "avx512"};  // in the enum's order
  return kNames[static_cast<int>(capability)];
}

const char* paged_decode_compiled_for(CpuCapability capability) {
#if defined(MHA_PAGED_DECODE_X86)
  if (capability == CpuCapability::kAvx512) return paged_decode_avx512_compiled_for();
  if (capability == CpuCapability::kAvx2) return paged_decode_avx2_compiled_for();
#endif
  return paged_decode_default_compiled_for();
}

Tensor paged_decode_attention(const PagedDecodeArgs& args, CpuCapability capability) {
  TORCH_CHECK_VALUE(cpu_runs(capability), "paged decode: this build or CPU has no ",
                    capability_name(capability), " kernel");
  // Seen by profilers (torch::autograd::profiler, RecordFunction) as one op.
  RECORD_FUNCTION("mha::paged_decode_attention", std::vector<c10::IValue>());
  check_args(args);
  check_blocks(args);
  Tensor out = at::empty(args.query.sizes(), args.query.options());  // (N, H, hd)
  const int64_t batch = args.query.size(0), heads = args.query.size(1);
  const DecodeItems items = decode_items(batch, heads, at::get_num_threads());
  auto kernel = paged_decode_default;
#if defined(MHA_PAGED_DECODE_X86)
  if (capability == CpuCapability::kAvx512) kernel = paged_decode_avx512;
  if (capability == CpuCapability::kAvx2) kernel = paged_decode_avx2;
#endif
  parallel_items(batch * items.per_sequence,
                 [&](int64_t begin, int64_t end) { kernel(args, items, begin, end, out); });
  return out;
}

Tensor paged_decode_attention(const PagedDecodeArgs& args) {
  static const CpuCapability best = available_cpu_capabilities().back();
  return paged_decode_attention(args, best);
}

}  // namespace detail
}  // namespace mha
