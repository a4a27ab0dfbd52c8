// The paged decode kernel's entry: the arguments checked, the capability
// chosen from this CPU's features, the output allocated.

#include "attention/paged_decode/paged_decode.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

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
  TORCH_CHECK_VALUE(q.scalar_type() == at::kFloat || q.scalar_type() == at::kBFloat16,
                    "paged decode: expected a float32 or bfloat16 query, but got ",
                    q.scalar_type());
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
    const int64_t used = (lengths[n] + block_size - 1) / block_size;
    TORCH_CHECK_VALUE(lengths[n] >= 0 && used <= a.block_table.size(1),
                      "paged decode: expected lengths[", n, "] in [0, ",
                      a.block_table.size(1) * block_size, "], but got ", lengths[n]);
    const int32_t* row = a.block_table.data_ptr<int32_t>() + n * a.block_table.stride(0);
    for (int64_t b = 0; b < used; ++b) {
      TORCH_CHECK_VALUE(row[b] >= 0 && row[b] < pool_blocks, "paged decode: expected block_table[",
                        n, "][", b, "] in [0, ", pool_blocks, "), but got ", row[b]);
    }
  }
}

}  // namespace

PagedDecodeArgs dense_blocks(const Tensor& query, const Tensor& keys, const Tensor& values) {
  const int64_t n = keys.size(0), length = keys.size(2);
  return {query, keys.transpose(1, 2), values.transpose(1, 2),  // (N, S, H, hd) views
          at::arange(n, at::kInt).unsqueeze(1),                 // sequence i: block i
          at::full({n}, length, at::kInt)};
}

std::vector<CpuCapability> available_cpu_capabilities() {
  std::vector<CpuCapability> available;
  for (CpuCapability c : {CpuCapability::kDefault, CpuCapability::kAvx2, CpuCapability::kAvx512}) {
    if (cpu_runs(c)) available.push_back(c);
  }
  return available;
}

const char* capability_name(CpuCapability capability) {
  switch (capability) {
    case CpuCapability::kAvx2:
      return "avx2";
    case CpuCapability::kAvx512:
      return "avx512";
    case CpuCapability::kDefault:
      break;
  }
  return "default";
}

Tensor paged_decode_attention(const PagedDecodeArgs& args, CpuCapability capability) {
  TORCH_CHECK_VALUE(cpu_runs(capability), "paged decode: this build or CPU has no ",
                    capability_name(capability), " kernel");
  // Seen by profilers (torch::autograd::profiler, RecordFunction) as one op.
  RECORD_FUNCTION("mha::paged_decode_attention", std::vector<c10::IValue>());
  check_args(args);
  check_blocks(args);
  Tensor out = at::empty(args.query.sizes(), args.query.options());  // (N, H, hd)
#if defined(MHA_PAGED_DECODE_X86)
  if (capability == CpuCapability::kAvx512) {
    paged_decode_avx512(args, out);
    return out;
  }
  if (capability == CpuCapability::kAvx2) {
    paged_decode_avx2(args, out);
    return out;
  }
#endif
  paged_decode_default(args, out);
  return out;
}

Tensor paged_decode_attention(const PagedDecodeArgs& args) {
  static const CpuCapability best = available_cpu_capabilities().back();
  return paged_decode_attention(args, best);
}

}  // namespace detail
}  // namespace mha
