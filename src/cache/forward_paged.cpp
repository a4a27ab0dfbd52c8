// MultiheadAttentionImpl::forward_paged: the attention pipeline with a
// PagedKVCache as the key/value source. The new positions of several sequences,
// packed as rows, go through the checks and the projector's one entry together;
// their keys and values are written into the blocks at once; a decode step
// (one query per sequence) attends through the paged decode kernel, reading
// the blocks in place, any other call sequence by sequence over its gathered
// keys (the causal mask aligned to the bottom right); one output projection.
// See docs/decoding.md.

#include <ATen/ATen.h>

#include <optional>

#include "attention/cached_attention.h"
#include "attention/masks.h"
#include "attention/paged_decode/paged_decode.h"
#include "attention/projector.h"
#include "cache/paged_call_checks.h"
#include "cache/paged_kv_cache_state.h"
#include "linear/int8_linear.h"
#include "mha/multihead_attention.h"
#include "mha/paged_kv_cache.h"

namespace mha {

using torch::Tensor;

namespace {

/// Whether the decode kernel takes the call: one new query per sequence, on
/// the CPU, in a dtype it reads (else each sequence's keys are gathered for SDPA).
bool decode_kernel_takes(const detail::PagedOffsets& offsets, const Tensor& q) {
  for (size_t i = 0; i + 1 < offsets.queries.size(); ++i) {
    if (offsets.queries[i + 1] - offsets.queries[i] != 1) return false;
  }
  return q.device().is_cpu() && (q.scalar_type() == at::kFloat || q.scalar_type() == at::kBFloat16);
}

/// Each sequence's new queries `q` (rows, H, hd) over its keys gathered from
/// the pools, one SDPA each; self-attention's causal mask aligned to the
/// bottom right. Returns (rows, E).
Tensor attend_each(const detail::PagedKVCacheState& state,
                   const std::vector<int64_t>& seq_ids,
                   const detail::PagedOffsets& offsets,
                   const Tensor& q) {
  std::vector<Tensor> outs;
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    const int64_t begin = offsets.queries[i], new_len = offsets.queries[i + 1] - begin;
    if (new_len == 0) continue;
    const auto [keys, values] = state.read(seq_ids[i]);                             // (1, H, S, hd)
    const Tensor q_seq = q.narrow(0, begin, new_len).transpose(0, 1).unsqueeze(0);  // (1, H, L, hd)
    const int64_t total = keys.size(2);
    // Self-attention: new query i sees key j iff j <= S - L + i; (L, S) additive.
    const Tensor mask =
        !state.is_static && new_len > 1
            ? detail::additive_mask(detail::causal_mask(new_len, total, q.device()), q.options())
            : Tensor();
    const Tensor out = std::get<0>(detail::attend_over_keys(q_seq, keys, values, mask, false));
    outs.push_back(out.squeeze(0).transpose(0, 1).flatten(1));  // (1, H, L, hd) -> (L, E)
  }
  return outs.empty() ? at::empty({0, q.size(1) * q.size(2)}, q.options()) : at::cat(outs);
}

}  // namespace

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward_paged(
    const Tensor& query,
    const Tensor& key,
    const Tensor& value,
    PagedKVCache& cache,
    const std::vector<int64_t>& seq_ids,
    const Tensor& cu_seqlens,
    const Tensor& cu_seqlens_kv) {
  const detail::PagedOffsets offsets =
      detail::check_paged_call(*this, cache, query, key, value, seq_ids, cu_seqlens, cu_seqlens_kv);

  // Everything is validated: from here on the cache changes.
  torch::NoGradGuard no_grad;
  const auto [q_rows, k_rows, v_rows] =  // (T, E'); (new key rows, E') or undefined
      detail::Projector::of(*this).project(query, key, value);
  // Inside a stack step the table has grown already, once for every layer,
  // and its layout is made; else both happen here. Then this pool makes the
  // growth's copies on write and writes the new keys and values.
  detail::PagedKVCacheState& state = detail::paged_kv_cache_state(cache);
  const detail::PagedStepRecord* step = state.blocks->step();
  std::optional<detail::PagedStepTables> own_tables;
  if (step == nullptr) {
    const std::vector<int64_t> new_positions = detail::new_key_positions(offsets);
    state.copy_blocks(state.blocks->grow(seq_ids, new_positions));
    own_tables = state.blocks->step_tables(seq_ids, new_positions);
  } else {
    state.copy_blocks(step->copies);
  }
  const detail::PagedStepTables& tables = step != nullptr ? step->tables : *own_tables;
  const int64_t heads = options.num_heads();
  auto split = [heads](const Tensor& x) { return x.defined() ? x.unflatten(-1, {heads, -1}) : x; };
  const Tensor q = split(q_rows), k = split(k_rows), v = split(v_rows);  // (rows, H, hd)
  state.write(tables.new_rows, k, v);
  const Tensor attended =  // (T, E)
      decode_kernel_takes(offsets, q)
          ? detail::paged_decode_attention({q, state.keys, state.values, tables.block_table,
                                            tables.lengths, state.blocks->block_size()})
                .flatten(1)
          : attend_each(state, seq_ids, offsets, q);
  return {detail::linear_int8_or_packed(*out_proj, attended), Tensor()};  // (T, E)
}

}  // namespace mha
