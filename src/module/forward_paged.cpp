// MultiheadAttentionImpl::forward_paged: a front end beside `forward`: its
// checks (module/paged_call_checks.h), then the one pipeline of the cached and
// paged calls (`attend_through_source`) with a PagedKVCache as the key/value
// source. The new positions of several sequences, packed as rows, go through
// the projector's one entry together; their keys and values are written into
// the blocks at once; each sequence takes the kernel `choose_paged_kernel`
// picks: one new query the paged decode kernel, reading the blocks in place,
// the others (prompt chunks) SDPA over their gathered keys (the causal mask
// aligned to the bottom right); one output projection. See docs/decoding.md.

#include <ATen/ATen.h>

#include <optional>

#include "attention/call_plan.h"
#include "attention/key_value_source.h"
#include "attention/masks.h"
#include "attention/paged_decode/paged_decode.h"
#include "attention/run_plan.h"
#include "cache/paged_kv_cache_state.h"
#include "common/validated_scope.h"
#include "mha/multihead_attention.h"
#include "mha/paged_kv_cache.h"
#include "module/paged_call_checks.h"

namespace mha {

using torch::Tensor;

namespace {

/// Sequence `i`'s new queries `q` (rows, H, hd) over its keys gathered from
/// the pools, one SDPA; self-attention's causal mask aligned to the bottom
/// right. Writes its (L, E) rows of `out`.
void attend_gathered(const detail::PagedKVCacheState& state,
                     int64_t id,
                     int64_t begin,
                     int64_t new_len,
                     const Tensor& q,
                     Tensor& out) {
  const auto [keys, values] = state.read(id);                                     // (1, H, S, hd)
  const Tensor q_seq = q.narrow(0, begin, new_len).transpose(0, 1).unsqueeze(0);  // (1, H, L, hd)
  // Self-attention: new query i sees key j iff j <= S - L + i; (L, S) additive.
  const Tensor mask = !state.is_static && new_len > 1
                          ? detail::additive_mask(
                                detail::causal_mask(new_len, keys.size(2), q.device()), q.options())
                          : Tensor();
  const Tensor seq_out = std::get<0>(detail::attend_over_keys(q_seq, keys, values, mask, false));
  out.narrow(0, begin, new_len).copy_(seq_out.squeeze(0).transpose(0, 1).flatten(1));  // (L, E)
}

/// The call's attention, (T, E): the sequences with one new query through the
/// paged decode kernel in one call (where it reads the pools), the others
/// one by one over their gathered keys. A sequence's result does not depend on
/// which others share the call.
Tensor attend_sequences(const detail::PagedKVCacheState& state,
                        const std::vector<int64_t>& seq_ids,
                        const detail::PagedOffsets& offsets,
                        const detail::PagedStepTables& tables,
                        const Tensor& q) {
  // Each sequence's kernel as the plan chooses: kDecode or kOverKeys.
  std::vector<detail::AttentionKernel> kernels;
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    kernels.push_back(detail::choose_paged_kernel(q, offsets.queries[i + 1] - offsets.queries[i]));
  }
  std::vector<int64_t> decode_seqs, decode_rows;
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    if (kernels[i] == detail::AttentionKernel::kDecode) {
      decode_seqs.push_back(static_cast<int64_t>(i));
      decode_rows.push_back(offsets.queries[i]);
    }
  }
  const int64_t block_size = state.blocks->block_size();
  auto kernel = [&](const Tensor& queries, const Tensor& table, const Tensor& lengths) {
    return detail::paged_decode_attention({queries, state.keys.unflatten(0, {-1, block_size}),
                                           state.values.unflatten(0, {-1, block_size}), table,
                                           lengths})  // pools (blocks, block_size, H, hd)
        .flatten(1);                                  // (n, H, hd) -> (n, E)
  };
  if (decode_rows.size() == static_cast<size_t>(q.size(0)) &&
      decode_seqs.size() == seq_ids.size()) {
    return kernel(q, tables.block_table, tables.lengths);  // every sequence decodes one token
  }
  Tensor out = at::empty({q.size(0), q.size(1) * q.size(2)}, q.options());  // (T, E)
  if (!decode_seqs.empty()) {
    const Tensor seqs = torch::tensor(decode_seqs), rows = torch::tensor(decode_rows);
    out.index_copy_(0, rows,
                    kernel(q.index_select(0, rows), tables.block_table.index_select(0, seqs),
                           tables.lengths.index_select(0, seqs)));
  }
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    const int64_t begin = offsets.queries[i], new_len = offsets.queries[i + 1] - begin;
    if (new_len > 0 && kernels[i] == detail::AttentionKernel::kOverKeys) {
      attend_gathered(state, seq_ids[i], begin, new_len, q, out);
    }
  }
  return out;
}

/// A PagedKVCache as a validated call's key/value source: the sequences'
/// tables grown (inside a stack step: grown already, once for every layer),
/// this pool's copies on write made, the new keys and values written, then
/// `attend`.
class PagedCacheSource final : public detail::KeyValueSource {
 public:
  PagedCacheSource(detail::PagedKVCacheState& state,
                   const std::vector<int64_t>& seq_ids,
                   const detail::PagedOffsets& offsets,
                   int64_t heads)
      : state_(state), seq_ids_(seq_ids), offsets_(offsets), heads_(heads) {}

  std::tuple<Tensor, Tensor> attend(const Tensor& q_rows,
                                    const Tensor& k_rows,
                                    const Tensor& v_rows) override {
    const detail::PagedStepRecord* step = state_.blocks->step();
    std::optional<detail::PagedStepTables> own_tables;
    if (step == nullptr) {
      const std::vector<int64_t> new_positions = detail::new_key_positions(offsets_);
      state_.copy_blocks(state_.blocks->grow(seq_ids_, new_positions));
      own_tables = state_.blocks->step_tables(seq_ids_, new_positions);
    } else {
      state_.copy_blocks(step->copies);
    }
    const detail::PagedStepTables& tables = step != nullptr ? step->tables : *own_tables;
    auto split = [this](const Tensor& x) {
      return x.defined() ? x.unflatten(-1, {heads_, -1}) : x;
    };
    const Tensor q = split(q_rows), k = split(k_rows), v = split(v_rows);  // (rows, H, hd)
    state_.write(tables.new_rows, k, v);
    return {attend_sequences(state_, seq_ids_, offsets_, tables, q), Tensor()};  // (T, E)
  }

 private:
  detail::PagedKVCacheState& state_;
  const std::vector<int64_t>& seq_ids_;
  const detail::PagedOffsets& offsets_;
  int64_t heads_;
};

}  // namespace

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward_paged(
    const Tensor& query,
    const Tensor& key,
    const Tensor& value,
    PagedKVCache& cache,
    const std::vector<int64_t>& seq_ids,
    const Tensor& cu_seqlens,
    const Tensor& cu_seqlens_kv) {
  // Checked here unless an outer entry (a layer, a stack step) checked this call.
  const detail::PagedCall call{query, key, value, seq_ids, cu_seqlens, cu_seqlens_kv};
  const detail::PagedOffsets offsets = detail::ValidatedScope::covers(this)
                                           ? detail::validated_paged_offsets(cache, call)
                                           : detail::check_paged_call(*this, cache, call);

  // Everything is validated: from here on the cache changes.
  torch::NoGradGuard no_grad;
  PagedCacheSource source(detail::paged_kv_cache_state(cache), seq_ids, offsets,
                          options.num_heads());
  return detail::attend_through_source(*this, query, key, value, source);  // (T, E)
}

}  // namespace mha
