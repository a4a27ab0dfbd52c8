// MultiheadAttentionImpl::forward_paged: a front end beside `forward`: its
// checks (module/paged_call_checks.h), then the one pipeline of the cached and
// paged calls, planned once (`plan_stored_call`) and run (`run_stored_plan`),
// with a PagedKVCache as the key/value store. The new positions of several
// sequences, packed as rows, go through the projector's one entry together;
// their keys and values are written into the blocks at once; each sequence
// takes the kernel its plan chose: one new query the paged decode kernel,
// reading the blocks in place, the others (prompt chunks) SDPA over their
// gathered keys (the causal mask aligned to the bottom right); one output
// projection. See docs/decoding.md.

#include <ATen/ATen.h>

#include <optional>

#include "attention/call_plan.h"
#include "attention/key_value_store.h"
#include "attention/run_stored_plan.h"
#include "cache/paged_kv_cache_state.h"
#include "common/validated_scope.h"
#include "mha/multihead_attention.h"
#include "mha/paged_kv_cache.h"
#include "module/paged_call_checks.h"

namespace mha {

using torch::Tensor;

namespace {

/// A PagedKVCache as a validated call's key/value store: the sequences'
/// tables grown (inside a stack step: grown already, once for every layer),
/// this pool's copies on write made, the new keys and values written; read
/// back as the pools and their block table, or one sequence's gathered.
class PagedCacheStore final : public detail::KeyValueStore {
 public:
  PagedCacheStore(detail::PagedKVCacheState& state,
                  const std::vector<int64_t>& seq_ids,
                  const detail::PagedOffsets& offsets)
      : state_(state), seq_ids_(seq_ids), offsets_(offsets) {}

  void write(const Tensor& k, const Tensor& v) override {
    const detail::PagedStepRecord* step = state_.blocks->step();
    if (step == nullptr) {
      const std::vector<int64_t> new_positions = detail::new_key_positions(offsets_);
      state_.copy_blocks(state_.blocks->grow(seq_ids_, new_positions));
      own_tables_ = state_.blocks->step_tables(seq_ids_, new_positions);
      tables_ = &*own_tables_;
    } else {
      state_.copy_blocks(step->copies);
      tables_ = &step->tables;
    }
    state_.write(tables_->new_rows, k, v);  // k, v (rows, H, hd)
  }

  detail::StoredKeyValues read(detail::AttentionKernel) override {
    const int64_t block_size = state_.blocks->block_size();
    // pools (blocks * block_size, H, hd) -> (blocks, block_size, H, hd)
    detail::StoredKeyValues pools = detail::StoredKeyValues::of(
        state_.keys.unflatten(0, {-1, block_size}), state_.values.unflatten(0, {-1, block_size}));
    pools.block_table = tables_->block_table;
    pools.lengths = tables_->lengths;
    return pools;
  }

  detail::StoredKeyValues read_sequence(size_t index) override {
    const auto [keys, values] = state_.read(seq_ids_[index]);  // (1, H, S, hd)
    return detail::StoredKeyValues::of(keys, values);
  }

 private:
  detail::PagedKVCacheState& state_;
  const std::vector<int64_t>& seq_ids_;
  const detail::PagedOffsets& offsets_;
  std::optional<detail::PagedStepTables> own_tables_;
  const detail::PagedStepTables* tables_ = nullptr;
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
  detail::PagedKVCacheState& state = detail::paged_kv_cache_state(cache);
  detail::StoredCall stored;
  stored.layout = detail::KeyValueLayout::kPaged;
  stored.dtype = query.scalar_type();
  stored.device = query.device();
  stored.num_heads = options.num_heads();
  stored.query_offsets = &offsets.queries;
  stored.causal = !state.is_static;
  PagedCacheStore store(state, seq_ids, offsets);
  return detail::run_stored_plan(detail::plan_stored_call(stored), stored,
                                 detail::AttentionWeights::of(*this), query, key, value,
                                 &store);  // (T, E)
}

}  // namespace mha
