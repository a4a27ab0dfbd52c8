// MultiheadAttentionImpl::forward_cached: incremental decoding with a KVCache.
// A front end beside `forward`: its checks (module/cached_call_checks.h), the
// mask over the cached keys (attention/masks), then the one pipeline of the
// cached and paged calls (`attend_through_source`) with the KVCache as the
// key/value source: the new positions written into its buffers, the cached
// keys and values read back through views (no per-step cat), the kernel
// `choose_over_keys_kernel` picks. See docs/decoding.md.

#include <ATen/ATen.h>

#include <tuple>

#include "attention/attention_call.h"
#include "attention/call_plan.h"
#include "attention/key_value_source.h"
#include "attention/masks.h"
#include "attention/projector.h"
#include "attention/run_plan.h"
#include "cache/kv_cache_state.h"
#include "mha/kv_cache.h"
#include "mha/multihead_attention.h"
#include "module/cached_call_checks.h"
#include "module/module_caches.h"

namespace mha {

using torch::Tensor;

namespace {

/// (L, N, E') or (N, L, E') -> (N, H, L, head_dim), a view; undefined stays undefined.
Tensor to_heads(const Tensor& x, bool batch_first, int64_t num_heads) {
  if (!x.defined()) return x;
  const Tensor split = x.unflatten(-1, {num_heads, -1});  // (.., H, hd)
  return batch_first ? split.transpose(1, 2) : split.permute({1, 2, 0, 3});
}

/// A KVCache as a validated call's key/value source.
class DenseCacheSource final : public detail::KeyValueSource {
 public:
  DenseCacheSource(detail::KVCacheState& cache,
                   const MultiheadAttentionImpl& module,
                   const detail::CachedCallShape& shape,
                   const Tensor& mask,
                   bool need_weights)
      : cache_(cache), module_(module), shape_(shape), mask_(mask), need_weights_(need_weights) {}

  std::tuple<Tensor, Tensor> attend(const Tensor& q_rows,
                                    const Tensor& k_rows,
                                    const Tensor& v_rows) override {
    const bool batch_first = shape_.batch_first;
    const int64_t heads = module_.options.num_heads();
    const Tensor q = to_heads(q_rows, batch_first, heads);  // (N, H, L, hd)
    auto [keys, values] = detail::cache_key_values(         // (N, H, S + extra, hd)
        cache_, module_, to_heads(k_rows, batch_first, heads), to_heads(v_rows, batch_first, heads),
        shape_.total_len);
    // A reordered cache's row map: the decode kernel reads through it in place.
    const Tensor rows = cache_.rows.defined() ? cache_.rows : cache_.position_rows;
    const bool in_place =
        detail::choose_over_keys_kernel(q, keys, values, mask_.defined(), need_weights_) ==
        detail::AttentionKernel::kDecode;
    if (rows.defined() && !in_place) {
      std::tie(keys, values) = read_without_map();  // (N, H, S + extra, hd)
    }
    auto [out, weights] =
        detail::attend_over_keys(q, keys, values, mask_, need_weights_, in_place ? rows : Tensor());
    // (N, H, L, hd) -> (N, L, E) or (L, N, E)
    out = batch_first ? out.transpose(1, 2).flatten(2) : out.permute({2, 0, 1, 3}).flatten(2);
    return {out, weights};
  }

 private:
  /// The keys and values row by row, for the kernels other than the decode
  /// kernel: a static cache's gathered once and kept, a growing cache's settled.
  std::pair<Tensor, Tensor> read_without_map() {
    if (cache_.rows.defined()) return detail::gathered_views(cache_);
    detail::settle_positions(cache_);
    return detail::cached_views(cache_);
  }

  detail::KVCacheState& cache_;
  const MultiheadAttentionImpl& module_;
  const detail::CachedCallShape& shape_;
  const Tensor& mask_;
  bool need_weights_;
};

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
  const detail::CachedCallShape s = detail::check_cached_call(*this, cache, call);
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
  DenseCacheSource source(cache, *this, s, mask, need_weights);
  auto [out, weights] = detail::attend_through_source(*this, query, key, value, source);
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
