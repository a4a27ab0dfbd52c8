// MultiheadAttentionImpl::forward_paged: the attention pipeline with a
// PagedKVCache as the key/value source. The new positions of several sequences,
// packed as rows, go through the checks and the projector's one entry together;
// each sequence's keys and values are written into its blocks and read back
// for its own attention (the causal mask aligned to the bottom right); one
// output projection. See docs/decoding.md.

#include <ATen/ATen.h>

#include "attention/cached_attention.h"
#include "attention/masks.h"
#include "attention/projector.h"
#include "cache/paged_call_checks.h"
#include "cache/paged_kv_cache_state.h"
#include "linear/int8_linear.h"
#include "mha/multihead_attention.h"
#include "mha/paged_kv_cache.h"

namespace mha {

using torch::Tensor;

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
  // Inside a stack step the table has grown already, once for every layer;
  // else it grows here. Then this pool makes the growth's copies on write.
  detail::PagedKVCacheState& state = detail::paged_kv_cache_state(cache);
  const detail::PagedStepRecord* step = state.blocks->step();
  state.copy_blocks(step != nullptr
                        ? step->copies
                        : state.blocks->grow(seq_ids, detail::new_key_positions(offsets)));
  const int64_t heads = options.num_heads();
  auto split = [heads](const Tensor& x) { return x.defined() ? x.unflatten(-1, {heads, -1}) : x; };
  const Tensor q = split(q_rows), k = split(k_rows), v = split(v_rows);  // (rows, H, hd)
  std::vector<Tensor> outs;
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    const int64_t key_begin = offsets.keys[i], new_keys = offsets.keys[i + 1] - key_begin;
    auto rows_of = [&](const Tensor& x) {
      return new_keys > 0 ? x.narrow(0, key_begin, new_keys) : Tensor();
    };
    const auto [keys, values] =  // (1, H, S, hd), the new positions last
        state.write_and_read(seq_ids[i], rows_of(k), rows_of(v));
    const int64_t begin = offsets.queries[i], new_len = offsets.queries[i + 1] - begin;
    if (new_len == 0) continue;
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
  const Tensor attended =
      outs.empty() ? at::empty({0, options.embed_dim()}, query.options()) : at::cat(outs);
  return {detail::linear_int8_or_packed(*out_proj, attended), Tensor()};  // (T, E)
}

}  // namespace mha
