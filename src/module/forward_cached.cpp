// MultiheadAttentionImpl::forward_cached: incremental decoding with a KVCache.
// A front end beside `forward`: its checks (module/cached_call_checks.h), the
// mask over the cached keys (attention/masks), then the one pipeline of the
// cached and paged calls, planned once (`plan_stored_call`) and run
// (`run_stored_plan`), with the KVCache as the key/value store: the new
// positions written into its buffers, the cached keys and values read back
// through views (no per-step cat). See docs/decoding.md.

#include <ATen/ATen.h>

#include <tuple>

#include "attention/attention_call.h"
#include "attention/call_plan.h"
#include "attention/key_value_store.h"
#include "attention/masks.h"
#include "attention/projector.h"
#include "attention/run_stored_plan.h"
#include "cache/kv_cache_state.h"
#include "common/validated_scope.h"
#include "mha/kv_cache.h"
#include "mha/multihead_attention.h"
#include "module/cached_call_checks.h"
#include "module/module_caches.h"

namespace mha {

using torch::Tensor;

namespace {

/// A KVCache as a validated call's key/value store.
class DenseCacheStore final : public detail::KeyValueStore {
 public:
  DenseCacheStore(detail::KVCacheState& cache,
                  const MultiheadAttentionImpl& module,
                  int64_t total_len)
      : cache_(cache), module_(module), total_len_(total_len) {}

  void write(const Tensor& k, const Tensor& v) override {
    std::tie(keys_, values_) =  // (N, H, S + extra, hd)
        detail::cache_key_values(cache_, module_, k, v, total_len_);
  }

  detail::StoredKeyValues read(detail::AttentionKernel kernel) override {
    // A reordered cache's row map: the decode kernel reads through it in place.
    const Tensor rows = cache_.rows.defined() ? cache_.rows : cache_.position_rows;
    if (kernel == detail::AttentionKernel::kDecode)
      return detail::StoredKeyValues::of(keys_, values_, rows);
    if (!rows.defined()) return detail::StoredKeyValues::of(keys_, values_);
    // The others read row by row: a static cache's gathered once and kept, a
    // growing cache's settled.
    if (cache_.rows.defined()) {
      const auto [keys, values] = detail::gathered_views(cache_);
      return detail::StoredKeyValues::of(keys, values);
    }
    detail::settle_positions(cache_);
    const auto [keys, values] = detail::cached_views(cache_);
    return detail::StoredKeyValues::of(keys, values);
  }

  detail::StoredKeyValues read_sequence(size_t) override {
    TORCH_CHECK(false, "a KVCache is read whole");
  }

 private:
  detail::KVCacheState& cache_;
  const MultiheadAttentionImpl& module_;
  int64_t total_len_;
  Tensor keys_, values_;
};

/// The plan's view of a checked call of `module` on its cache: its sizes `s`,
/// its batched `query`, the additive `mask` over the cached keys.
detail::StoredCall dense_call(const MultiheadAttentionImpl& module,
                              const detail::CachedCallShape& s,
                              const Tensor& query,
                              const Tensor& mask,
                              bool need_weights) {
  detail::StoredCall call;
  call.layout = detail::KeyValueLayout::kDense;
  call.dtype = query.scalar_type();
  call.device = query.device();
  call.num_heads = module.options.num_heads();
  call.store_dtype = detail::Projector::first_weight(module).scalar_type();
  call.batch_first = s.batch_first;
  call.query_len = s.tgt_len;
  call.key_len = s.total_len + detail::extra_key_rows(module);
  call.need_weights = need_weights;
  call.mask = mask;
  return call;
}

}  // namespace

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward_cached(const Tensor& query_in,
                                                                  const Tensor& key_in,
                                                                  const Tensor& value_in,
                                                                  KVCache& kv_cache,
                                                                  const Tensor& key_padding_mask,
                                                                  bool need_weights,
                                                                  const Tensor& attn_mask,
                                                                  bool average_attn_weights) {
  detail::KVCacheState& cache = detail::kv_cache_state(kv_cache);
  const detail::AttentionCall call{query_in,
                                   key_in,
                                   value_in,
                                   key_padding_mask,
                                   attn_mask,
                                   need_weights,
                                   average_attn_weights,
                                   /*is_causal=*/false};
  // Checked here, or by the layer or stack that makes this call (before any cache changes).
  const detail::CachedCallShape s = detail::ValidatedScope::covers(this)
                                        ? detail::cached_call_shape(*this, cache, call)
                                        : detail::check_cached_call(*this, cache, call);
  // Unbatched key_padding_mask (S) -> (1, S); the mask over the cached keys.
  const Tensor kpm =
      s.batched || !key_padding_mask.defined() ? key_padding_mask : key_padding_mask.unsqueeze(0);
  const Tensor mask = detail::cached_call_mask(
      kpm, attn_mask, !cache.is_static,
      {s.bsz, options.num_heads(), s.tgt_len, s.total_len, detail::extra_key_rows(*this)},
      detail::Projector::first_weight(*this).options());

  // Everything is validated: from here on the cache changes.
  torch::NoGradGuard no_grad;
  // Unbatched: (L, E) -> (1, L, E), in the batch-first layout.
  auto batch = [&](const Tensor& t) { return s.batched || !t.defined() ? t : t.unsqueeze(0); };
  const bool self_qkv = query_in.is_same(key_in) && key_in.is_same(value_in);
  const Tensor query = batch(query_in);
  const Tensor key = self_qkv ? query : batch(key_in);
  const Tensor value = self_qkv ? query : batch(value_in);
  const detail::StoredCall stored = dense_call(*this, s, query, mask, need_weights);
  DenseCacheStore store(cache, *this, s.total_len);
  auto [out, weights] =
      detail::run_stored_plan(detail::plan_stored_call(stored), stored,
                              detail::AttentionWeights::of(*this), query, key, value, &store);
  if (weights.defined() && average_attn_weights) {
    weights = weights.mean(/*dim=*/1);  // (N, L, S + extra)
  }
  if (!s.batched) {
    out = out.squeeze(0);
    weights = weights.defined() ? weights.squeeze(0) : weights;
  }
  return {out, weights};
}

}  // namespace mha
