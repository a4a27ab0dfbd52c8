// The paged decode kernel's entry: the arguments checked, the capability
// chosen from this CPU's features, the output allocated.

#include "attention/paged_decode/paged_decode.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "common/cpu_capability.h"
#include "common/decode_dtypes.h"
#include "common/parallel_items.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

/// Cached keys and values below which a call stays on the calling thread:
/// waking a second one costs more than reading them (a short sequence's step).
constexpr int64_t kSerialReads = int64_t{1} << 17;

/// The cached keys' and values' elements a call reads.
int64_t cached_reads(const PagedDecodeArgs& a) {
  const int32_t* lengths = a.lengths.data_ptr<int32_t>();
  int64_t positions = 0;
  for (int64_t n = 0; n < a.lengths.size(0); ++n) positions += lengths[n];
  return 2 * positions * a.query.size(1) * a.query.size(2);
}

/// Throws unless the pools, query, table and lengths agree (names the argument).
void check_args(const PagedDecodeArgs& a) {
  const Tensor& q = a.query;
  TORCH_CHECK_VALUE(q.dim() == 3 && q.stride(2) == 1,
                    "paged decode: expected query (N, H, hd) with contiguous rows, but got sizes ",
                    q.sizes(), " and strides ", q.strides());
  TORCH_CHECK_VALUE(decode_kernel_reads(q.scalar_type(), q.device()),
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

/// A pool's strides: a block, a row in it, a head.
PoolStrides pool_strides(const Tensor& pool) {
  return {pool.stride(0), pool.stride(1), pool.stride(2)};
}

/// The checked `a`'s operands as the kernels read them, writing into `out`.
PagedDecodeOperands operands_of(const PagedDecodeArgs& a, Tensor& out) {
  const Tensor& q = a.query;  // (N, H, hd)
  return {q.data_ptr(),
          a.keys.data_ptr(),
          a.values.data_ptr(),
          out.data_ptr(),
          a.block_table.data_ptr<int32_t>(),
          a.lengths.data_ptr<int32_t>(),
          q.scalar_type() == at::kBFloat16,
          a.table_per_position,
          q.size(1),
          q.size(2),
          a.keys.size(1),
          a.block_table.stride(0),
          {q.stride(0), q.stride(1)},
          pool_strides(a.keys),
          pool_strides(a.values)};
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

}  // namespace

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

const char* paged_decode_compiled_for(CpuCapability capability) {
  return MHA_CAPABILITY_ENTRY(capability, paged_decode, _compiled_for)();
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
  const PagedDecodeOperands operands = operands_of(args, out);
  const auto kernel = MHA_CAPABILITY_ENTRY(capability, paged_decode, );
  const int64_t count = batch * items.per_sequence;
  if (cached_reads(args) < kSerialReads) {
    kernel(operands, items, 0, count);
  } else {
    parallel_items(count, [&](int64_t begin, int64_t end) { kernel(operands, items, begin, end); });
  }
  return out;
}

Tensor paged_decode_attention(const PagedDecodeArgs& args) {
  return paged_decode_attention(args, best_cpu_capability());
}

}  // namespace detail
}  // namespace mha
