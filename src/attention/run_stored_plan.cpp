// Calls over stored keys and values, run as their plan says
// (attention/run_stored_plan.h).

#include "attention/run_stored_plan.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <vector>

#include "attention/cached_attention.h"
#include "attention/masks.h"
#include "attention/paged_decode/paged_decode.h"
#include "attention/projector.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

/// (L, N, E') or (N, L, E') -> (N, H, L, hd), a view; undefined stays undefined.
Tensor to_heads(const Tensor& x, bool batch_first, int64_t num_heads) {
  if (!x.defined()) return x;
  const Tensor split = x.unflatten(-1, {num_heads, -1});  // (.., H, hd)
  return batch_first ? split.transpose(1, 2) : split.permute({1, 2, 0, 3});
}

/// Rows (T, E') -> (T, H, hd), a view; undefined stays undefined.
Tensor split_heads(const Tensor& x, int64_t num_heads) {
  return x.defined() ? x.unflatten(-1, {num_heads, -1}) : x;
}

/// kDense: the queries (N, H, L, hd) over all the store holds, by the plan's
/// one kernel. Returns (N, L, E') or (L, N, E') and the weights or undefined.
std::tuple<Tensor, Tensor> attend_dense(const CallPlan& plan,
                                        const StoredCall& call,
                                        const Tensor& q_rows,
                                        const Tensor& k_rows,
                                        const Tensor& v_rows,
                                        KeyValueStore& store) {
  const Tensor q = to_heads(q_rows, call.batch_first, call.num_heads);  // (N, H, L, hd)
  store.write(to_heads(k_rows, call.batch_first, call.num_heads),
              to_heads(v_rows, call.batch_first, call.num_heads));
  const StoredKeyValues kv = store.read(plan.kernel);  // (N or R, H, S, hd)
  Tensor out, weights;
  switch (plan.kernel) {
    case AttentionKernel::kDecode:
      out = decode_over_keys(q, kv.keys, kv.values, kv.rows);
      break;
    case AttentionKernel::kOverKeys:
      out = sdpa_over_keys(q, kv.keys, kv.values, call.mask);
      break;
    case AttentionKernel::kOverKeysWithWeights:
      std::tie(out, weights) = softmax_over_keys(q, kv.keys, kv.values, call.mask);
      break;
    default:
      TORCH_CHECK(false, "run_stored_plan: not a kernel of a call over stored keys");
  }
  // (N, H, L, hd) -> (N, L, E') or (L, N, E')
  out = call.batch_first ? out.transpose(1, 2).flatten(2) : out.permute({2, 0, 1, 3}).flatten(2);
  return {out, weights};
}

/// Sequence `i`'s query rows [begin, begin + length) of q (T, H, hd) over
/// `keys`, `values` (1, H, S, hd) with the additive `mask` (undefined: none)
/// by `kernel`; writes its rows of `out` (T, E').
void attend_sequence(AttentionKernel kernel,
                     const Tensor& q,
                     int64_t begin,
                     int64_t length,
                     const Tensor& keys,
                     const Tensor& values,
                     const Tensor& mask,
                     Tensor& out) {
  const Tensor q_seq = q.narrow(0, begin, length).transpose(0, 1).unsqueeze(0);  // (1, H, L, hd)
  const Tensor seq_out = kernel == AttentionKernel::kDecode
                             ? decode_over_keys(q_seq, keys, values)
                             : sdpa_over_keys(q_seq, keys, values, mask);  // (1, H, L, hd)
  out.narrow(0, begin, length).copy_(seq_out.squeeze(0).transpose(0, 1).flatten(1));  // (L, E')
}

/// kPacked: each sequence of q, k, v (T, H, hd) over its own rows. -> (T, E').
Tensor attend_packed(const CallPlan& plan,
                     const StoredCall& call,
                     const Tensor& q,
                     const Tensor& k,
                     const Tensor& v) {
  const std::vector<int64_t>& offsets = *call.query_offsets;
  Tensor out = at::empty({q.size(0), q.size(1) * q.size(2)}, q.options());  // (T, E')
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    const int64_t begin = offsets[i], length = offsets[i + 1] - begin;
    if (length == 0) continue;
    auto own = [&](const Tensor& x) {  // (L, H, hd) -> (1, H, L, hd)
      return x.narrow(0, begin, length).transpose(0, 1).unsqueeze(0);
    };
    attend_sequence(plan.sequence_kernels[i], q, begin, length, own(k), own(v), Tensor(), out);
  }
  return out;
}

/// The decode kernel over the pools in place: `queries` (n, H, hd), one per
/// sequence, with those sequences' block table and lengths. -> (n, E').
Tensor decode_in_pools(const StoredKeyValues& pools,
                       const Tensor& queries,
                       const Tensor& table,
                       const Tensor& lengths) {
  return paged_decode_attention({queries, pools.keys, pools.values, table, lengths})
      .flatten(1);  // (n, H, hd) -> (n, E')
}

/// kPaged's kDecode sequences of q (T, H, hd), in one call of the decode
/// kernel over the pools in place, into their rows of `out` (T, E').
void decode_paged(const CallPlan& plan,
                  const StoredCall& call,
                  const Tensor& q,
                  KeyValueStore& store,
                  Tensor& out) {
  std::vector<int64_t> seqs, rows;
  for (size_t i = 0; i < plan.sequence_kernels.size(); ++i) {
    if (plan.sequence_kernels[i] != AttentionKernel::kDecode) continue;
    seqs.push_back(static_cast<int64_t>(i));
    rows.push_back((*call.query_offsets)[i]);
  }
  if (seqs.empty()) return;
  const StoredKeyValues pools = store.read(AttentionKernel::kDecode);
  const Tensor seq_index = torch::tensor(seqs), row_index = torch::tensor(rows);
  out.index_copy_(0, row_index,
                  decode_in_pools(pools, q.index_select(0, row_index),
                                  pools.block_table.index_select(0, seq_index),
                                  pools.lengths.index_select(0, seq_index)));
}

/// kPaged: q (T, H, hd) over each sequence's stored keys: the kDecode
/// sequences in one call, the others (prompt chunks) one by one over their
/// gathered keys. A sequence's result does not depend on which others share
/// the call. -> (T, E').
Tensor attend_paged(const CallPlan& plan,
                    const StoredCall& call,
                    const Tensor& q,
                    KeyValueStore& store) {
  const std::vector<AttentionKernel>& kernels = plan.sequence_kernels;
  const bool every_one_decodes = q.size(0) == static_cast<int64_t>(kernels.size()) &&
                                 std::all_of(kernels.begin(), kernels.end(), [](AttentionKernel k) {
                                   return k == AttentionKernel::kDecode;
                                 });
  if (every_one_decodes) {  // a decode step: one call, no output to assemble
    const StoredKeyValues pools = store.read(AttentionKernel::kDecode);
    return decode_in_pools(pools, q, pools.block_table, pools.lengths);  // (T, E')
  }
  Tensor out = at::empty({q.size(0), q.size(1) * q.size(2)}, q.options());  // (T, E')
  decode_paged(plan, call, q, store, out);
  const std::vector<int64_t>& offsets = *call.query_offsets;
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    const int64_t begin = offsets[i], length = offsets[i + 1] - begin;
    if (length == 0 || plan.sequence_kernels[i] != AttentionKernel::kOverKeys) continue;
    const StoredKeyValues kv = store.read_sequence(i);  // (1, H, S, hd)
    // Self-attention: new query j sees key s iff s <= S - L + j; (L, S) additive.
    const Tensor mask =
        call.causal && length > 1
            ? additive_mask(causal_mask(length, kv.keys.size(2), q.device()), q.options())
            : Tensor();
    attend_sequence(AttentionKernel::kOverKeys, q, begin, length, kv.keys, kv.values, mask, out);
  }
  return out;
}

}  // namespace

std::tuple<Tensor, Tensor> run_stored_plan(const CallPlan& plan,
                                           const StoredCall& call,
                                           const AttentionWeights& module,
                                           const Tensor& query,
                                           const Tensor& key,
                                           const Tensor& value,
                                           KeyValueStore* store) {
  const auto [q, k, v] =  // (.., E'); k, v undefined for a filled static cache
      Projector::of(module).project(query, key, value);
  if (call.layout == KeyValueLayout::kDense) {
    const auto [out, weights] = attend_dense(plan, call, q, k, v, *store);
    return {Projector::output(module, out), weights};
  }
  const Tensor q_heads = split_heads(q, call.num_heads);  // (T, H, hd)
  Tensor out;                                             // (T, E')
  if (call.layout == KeyValueLayout::kPacked) {
    out = attend_packed(plan, call, q_heads, split_heads(k, call.num_heads),
                        split_heads(v, call.num_heads));
  } else {
    store->write(split_heads(k, call.num_heads), split_heads(v, call.num_heads));
    out = attend_paged(plan, call, q_heads, *store);
  }
  return {Projector::output(module, out), Tensor()};
}

}  // namespace detail
}  // namespace mha
