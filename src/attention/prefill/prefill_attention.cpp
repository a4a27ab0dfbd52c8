// The prefill attention's entry: the operands checked, the capability chosen
// from this CPU's features, the row tiles split over threads (the kernels lay
// out each head's keys and values themselves).

#include "attention/prefill/prefill_attention.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <vector>

#include "common/calling_thread.h"
#include "common/parallel_items.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

/// Runs of row tiles per thread: enough that a thread that wakes late takes fewer.
constexpr int64_t kRunsPerThread = 8;

bool float_cpu_rows(const Tensor& t) {
  return t.dim() == 4 && t.scalar_type() == at::kFloat && t.device().is_cpu() && t.stride(-1) == 1;
}

}  // namespace

bool prefill_attention_takes(const Tensor& q, const Tensor& k, const Tensor& v) {
  return float_cpu_rows(q) && float_cpu_rows(k) && float_cpu_rows(v) && q.size(-1) % 32 == 0 &&
         k.size(2) > 0 && k.sizes() == v.sizes() && q.size(0) == k.size(0) &&
         q.size(1) == k.size(1) && q.size(3) == k.size(3);
}

void prefill_attention(
    const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, CpuCapability capability) {
  TORCH_CHECK_VALUE(cpu_runs(capability), "prefill attention: this build or CPU has no ",
                    capability_name(capability), " kernel");
  TORCH_CHECK(prefill_attention_takes(q, k, v) && float_cpu_rows(out) && out.sizes() == q.sizes(),
              "prefill attention: expected float32 CPU q (N, H, L, hd), k and v (N, H, S, hd) "
              "and out shaped as q, last dimensions contiguous, hd a multiple of 32, but got q ",
              q.sizes(), ", k ", k.sizes(), ", v ", v.sizes(), ", out ", out.sizes());
  RECORD_FUNCTION("mha::prefill_attention", std::vector<c10::IValue>());
  const int64_t heads = q.size(1), q_len = q.size(2), kv_len = k.size(2), hd = q.size(3);
  const PrefillArgs args{q.data_ptr<float>(),
                         k.data_ptr<float>(),
                         v.data_ptr<float>(),
                         out.data_ptr<float>(),
                         heads,
                         q_len,
                         kv_len,
                         hd,
                         {q.stride(0), q.stride(1), q.stride(2)},
                         {k.stride(0), k.stride(1), k.stride(2)},
                         {v.stride(0), v.stride(1), v.stride(2)},
                         {out.stride(0), out.stride(1), out.stride(2)},
                         static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)))};
  const auto kernel = MHA_CAPABILITY_ENTRY(capability, prefill_attention, );
  const int64_t row_tiles = (q_len + kPrefillTileRows - 1) / kPrefillTileRows;
  const int64_t tiles = q.size(0) * heads * row_tiles;
  if (q.size(0) * heads * q_len * kv_len * hd < kCallingThreadMultiplyAdds) {
    kernel(args, 0, tiles);
  } else {
    parallel_items(
        tiles, [&](int64_t begin, int64_t end) { kernel(args, begin, end); }, kRunsPerThread);
  }
}

void prefill_attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out) {
  prefill_attention(q, k, v, out, best_cpu_capability());
}

Tensor prefill_attention_rows(const Tensor& q,
                              const Tensor& k,
                              const Tensor& v,
                              bool sequence_first) {
  const int64_t batch = q.size(0), heads = q.size(1), len = q.size(2), hd = q.size(3);
  // sequence-first (L, N, H, hd), else (N, L, H, hd)
  Tensor rows = sequence_first ? at::empty({len, batch, heads, hd}, q.options())
                               : at::empty({batch, len, heads, hd}, q.options());
  Tensor out = sequence_first ? rows.permute({1, 2, 0, 3}) : rows.transpose(1, 2);  // (N, H, L, hd)
  prefill_attention(q, k, v, out);
  return rows.flatten(2);  // (L, N, E) or (N, L, E)
}

}  // namespace detail
}  // namespace mha
