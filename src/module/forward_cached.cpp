// MultiheadAttentionImpl::forward_cached: incremental decoding with a KVCache.
// The attention pipeline with a KVCache as the key/value source: checks, the
// projector's one entry, the cache (new positions written into its buffers, the
// cached keys and values read back through views, no per-step cat), the kernel
// over them with the causal mask aligned to the bottom right, the output
// projection. See docs/decoding.md.

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "attention/attention_call.h"
#include "attention/cached_attention.h"
#include "attention/input_checks.h"
#include "attention/masks.h"
#include "attention/projector.h"
#include "cache/kv_cache_state.h"
#include "common/shape_format.h"
#include "linear/int8_linear.h"
#include "mha/kv_cache.h"
#include "mha/multihead_attention.h"
#include "module/module_caches.h"

namespace mha {

using torch::Tensor;

namespace {

/// Sizes of one call, in the caller's layout.
struct CallShape {
  bool batched = true;
  bool batch_first = false;  ///< (N, L, E) layout (unbatched inputs get it too)
  int64_t bsz = 1;
  int64_t tgt_len = 0;    ///< L_new: new query positions
  int64_t total_len = 0;  ///< key positions after the call, extra rows not counted
};

/// Training mode, the cache's kind against the key/value given, and the module
/// and dtype/device the cache was filled with.
void check_cache_use(const MultiheadAttentionImpl& m,
                     const detail::KVCacheState& cache,
                     const detail::AttentionCall& call) {
  const Tensor &query = call.query, &key = call.key, &value = call.value;
  TORCH_CHECK(
      !m.is_training(),
      "forward_cached is for inference, but the module is in training mode; call module->eval()");
  TORCH_CHECK(query.defined(), "expected query to be a defined tensor, but got an undefined one");
  TORCH_CHECK(
      key.defined() == value.defined(),
      fmt::format(
          "expected key and value both defined or both undefined, but got key {} and value {}",
          key.defined() ? "defined" : "undefined", value.defined() ? "defined" : "undefined"));
  TORCH_CHECK(cache.owner == nullptr || cache.owner == &m,
              "the cache was filled by another module; use one KVCache per module (or clear() it)");
  if (!cache.is_static) {
    TORCH_CHECK(key.defined(),
                "expected key and value (the new positions) for a self-attention cache, but got "
                "undefined ones");
  } else if (cache.filled) {
    TORCH_CHECK(
        !key.defined(),
        "expected undefined key and value: this static_kv cache already holds the projected "
        "memory (clear() it to set another)");
  } else {
    TORCH_CHECK(
        key.defined(),
        "expected key and value (the memory) on the first call with a static_kv cache, but got "
        "undefined ones");
  }
  const Tensor param = detail::Projector::first_weight(m);
  if (cache.owner != nullptr) {
    TORCH_CHECK_TYPE(
        cache.keys.scalar_type() == param.scalar_type(),
        fmt::format(
            "expected the cache's dtype {} to be the module's {}; the module was converted after "
            "filling the cache (clear() it)",
            c10::toString(cache.keys.scalar_type()), c10::toString(param.scalar_type())));
    TORCH_CHECK(
        cache.keys.device() == param.device(),
        fmt::format(
            "expected the cache's device {} to be the module's {}; the module was moved after "
            "filling the cache (clear() it)",
            cache.keys.device().str(), param.device().str()));
  }
}

/// dtype, device and feature size of query/key/value (as `forward` checks
/// them), the masks' device and dtype.
void check_tensors(const MultiheadAttentionImpl& m, const detail::AttentionCall& call) {
  detail::check_dtypes_and_devices(detail::Projector::first_weight(m), call);
  detail::check_feature_sizes(m.options, call.query, call.key, call.value);
  const Tensor& query = call.query;
  for (const auto& [mask, name] :
       {std::pair<const Tensor&, const char*>{call.key_padding_mask, "key_padding_mask"},
        std::pair<const Tensor&, const char*>{call.attn_mask, "attn_mask"}}) {
    TORCH_CHECK_TYPE(
        !mask.defined() || mask.scalar_type() == at::kBool ||
            mask.scalar_type() == query.scalar_type(),
        fmt::format("expected {} to be bool or of the query's dtype {}, but got {}", name,
                    c10::toString(query.scalar_type()), c10::toString(mask.scalar_type())));
  }
}

/// Batch and sequence sizes of the call against each other, the cache and its capacity.
CallShape check_sizes(const MultiheadAttentionImpl& m,
                      const detail::KVCacheState& cache,
                      const detail::AttentionCall& call) {
  const Tensor &query = call.query, &key = call.key, &value = call.value;
  CallShape s;
  s.batched = query.dim() == 3;
  s.batch_first = !s.batched || m.options.batch_first();
  const int64_t seq_dim = s.batched && !s.batch_first ? 0 : 1;
  const int64_t batch_dim = 1 - seq_dim;
  s.tgt_len = query.size(s.batched ? seq_dim : 0);
  s.bsz = s.batched ? query.size(batch_dim) : 1;
  int64_t src_len = 0;
  if (key.defined()) {
    src_len = key.size(s.batched ? seq_dim : 0);
    if (s.batched) {
      TORCH_CHECK(
          key.size(batch_dim) == s.bsz && value.size(batch_dim) == s.bsz,
          fmt::format(
              "expected key and value batch size {} (the query's), but got key {} and value {}",
              s.bsz, key.size(batch_dim), value.size(batch_dim)));
    }
    TORCH_CHECK(value.size(s.batched ? seq_dim : 0) == src_len,
                fmt::format("expected value sequence length {} (the key's), but got {}", src_len,
                            value.size(s.batched ? seq_dim : 0)));
  }
  const bool holds_batch = cache.length > 0 || cache.filled;
  TORCH_CHECK(
      !holds_batch || cache.keys.size(0) == s.bsz,
      fmt::format("expected query batch size {} (the cache's; reorder() changes it), but got {}",
                  cache.keys.size(0), s.bsz));
  if (cache.is_static) {
    s.total_len = cache.filled ? cache.length : src_len;
    return s;
  }
  TORCH_CHECK(
      src_len == s.tgt_len,
      fmt::format(
          "expected key sequence length {} (the query's: a self-attention cache appends one key "
          "per new query), but got {}",
          s.tgt_len, src_len));
  s.total_len = cache.length + s.tgt_len;
  TORCH_CHECK(
      cache.max_len == 0 || s.total_len <= cache.max_len,
      fmt::format("the cache is full: it holds {} of max_len {} positions, and query adds {}",
                  cache.length, cache.max_len, s.tgt_len));
  return s;
}

/// The additive float mask for SDPA, (1 or N, 1 or H, L_new, total + extra),
/// or undefined when nothing is masked. Self-attention: new query i sees key j
/// iff j <= t0 + i (bottom-right causal); the extra columns are always visible.
Tensor attention_mask(const MultiheadAttentionImpl& m,
                      bool is_static,
                      const CallShape& s,
                      int64_t extra,
                      const Tensor& key_padding_mask,
                      const Tensor& attn_mask) {
  const Tensor param = detail::Projector::first_weight(m);
  const auto dtype = param.scalar_type();
  const int64_t num_heads = m.options.num_heads();
  const Tensor kpm = detail::canonical_key_padding_mask(key_padding_mask, attn_mask, dtype);
  Tensor mask = detail::canonical_attn_mask(attn_mask, dtype);
  if (mask.defined()) {
    // (L, S) -> (1, 1, L, S); (N * H, L, S) -> (N, H, L, S)
    mask = mask.dim() == 2 ? mask.reshape({1, 1, s.tgt_len, s.total_len})
                           : mask.reshape({s.bsz, num_heads, s.tgt_len, s.total_len});
  }
  if (!is_static && s.tgt_len > 1) {
    // (L, S) bool -> (1, 1, L, S) additive: new query i sees key j iff j <= t0 + i
    const Tensor causal = detail::additive_mask(
        detail::causal_mask(s.tgt_len, s.total_len, param.device()), param.options());
    const Tensor causal4 = causal.view({1, 1, s.tgt_len, s.total_len});
    mask = mask.defined() ? mask + causal4 : causal4;
  }
  if (kpm.defined()) {
    const Tensor kpm4 = kpm.reshape({s.bsz, 1, 1, s.total_len});  // (N, 1, 1, S)
    mask = mask.defined() ? mask + kpm4 : kpm4;
  }
  if (mask.defined() && extra > 0) {
    mask = detail::pad_visible_keys(mask, extra);  // (.., S + extra)
  }
  return mask;
}

/// (L, N, E') or (N, L, E') -> (N, H, L, head_dim), a view; undefined stays undefined.
Tensor to_heads(const Tensor& x, bool batch_first, int64_t num_heads) {
  if (!x.defined()) return x;
  const Tensor split = x.unflatten(-1, {num_heads, -1});  // (.., H, hd)
  return batch_first ? split.transpose(1, 2) : split.permute({1, 2, 0, 3});
}

/// Every check of a forward_cached call, before anything changes; returns its
/// sizes and the SDPA mask (see `attention_mask`).
std::pair<CallShape, Tensor> check_call(const MultiheadAttentionImpl& m,
                                        const detail::KVCacheState& cache,
                                        const detail::AttentionCall& call,
                                        int64_t extra) {
  const Tensor &query = call.query, &key = call.key, &value = call.value;
  const Tensor &key_padding_mask = call.key_padding_mask, &attn_mask = call.attn_mask;
  check_cache_use(m, cache, call);
  // Ranks; attn_mask is checked below against the cached length.
  detail::mha_shape_check(query, key.defined() ? key : query, value.defined() ? value : query,
                          key_padding_mask, Tensor(), m.options.num_heads());
  check_tensors(m, call);
  const CallShape s = check_sizes(m, cache, call);
  if (attn_mask.defined()) {
    detail::check_attn_mask_shape(attn_mask, s.tgt_len, s.total_len, s.bsz * m.options.num_heads());
  }
  // Unbatched key_padding_mask (S) -> (1, S).
  const Tensor kpm =
      s.batched || !key_padding_mask.defined() ? key_padding_mask : key_padding_mask.unsqueeze(0);
  if (kpm.defined()) {
    detail::check_key_padding_mask_shape(kpm, s.total_len, s.bsz);
  }
  return {s, attention_mask(m, cache.is_static, s, extra, kpm, attn_mask)};
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
  const int64_t extra = detail::extra_key_rows(*this);
  CallShape s;
  Tensor mask;
  const detail::AttentionCall call{query_in,
                                   key_in,
                                   value_in,
                                   key_padding_mask,
                                   attn_mask,
                                   need_weights,
                                   average_attn_weights,
                                   /*is_causal=*/false};
  std::tie(s, mask) = check_call(*this, cache, call, extra);

  // Everything is validated: from here on the cache changes.
  torch::NoGradGuard no_grad;
  // Unbatched: (L, E) -> (1, L, E), in the batch-first layout.
  auto batch = [&](const Tensor& t) { return s.batched || !t.defined() ? t : t.unsqueeze(0); };
  const bool self_qkv = query_in.is_same(key_in) && key_in.is_same(value_in);
  const Tensor query = batch(query_in);
  const Tensor key = self_qkv ? query : batch(key_in);
  const Tensor value = self_qkv ? query : batch(value_in);
  const auto [q_rows, k_rows, v_rows] =  // (.., E'); k, v undefined for a filled static cache
      detail::Projector::of(*this).project(query, key, value);
  const int64_t heads = options.num_heads();
  const Tensor q = to_heads(q_rows, s.batch_first, heads);  // (N, H, L, hd)
  const auto [keys, values] = detail::cache_key_values(     // (N, H, S + extra, hd)
      cache, *this, to_heads(k_rows, s.batch_first, heads), to_heads(v_rows, s.batch_first, heads),
      s.total_len);
  auto [out, weights] = detail::attend_over_keys(q, keys, values, mask, need_weights);
  // (N, H, L, hd) -> (N, L, E) or (L, N, E), then the output projection
  out = s.batch_first ? out.transpose(1, 2).flatten(2) : out.permute({2, 0, 1, 3}).flatten(2);
  out = detail::linear_int8_or_packed(*out_proj, out);  // on its int8 or prepacked form if any
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
