// The checks of MultiheadAttentionImpl::forward_cached (module/cached_call_checks.h).

#include "module/cached_call_checks.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <utility>

#include "attention/input_checks.h"
#include "attention/projector.h"
#include "mha/multihead_attention.h"

namespace mha {

using torch::Tensor;

namespace {

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

/// Batch and sequence sizes of the call (sized `s`) against each other, the
/// cache and its capacity.
void check_sizes(const detail::CachedCallShape& s,
                 const detail::KVCacheState& cache,
                 const detail::AttentionCall& call) {
  const Tensor &key = call.key, &value = call.value;
  const int64_t seq_dim = s.batched && !s.batch_first ? 0 : 1;
  const int64_t batch_dim = 1 - seq_dim;
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
      !holds_batch || detail::batch_of(cache) == s.bsz,
      fmt::format("expected query batch size {} (the cache's; reorder() changes it), but got {}",
                  detail::batch_of(cache), s.bsz));
  if (cache.is_static) return;
  TORCH_CHECK(
      src_len == s.tgt_len,
      fmt::format(
          "expected key sequence length {} (the query's: a self-attention cache appends one key "
          "per new query), but got {}",
          s.tgt_len, src_len));
  TORCH_CHECK(
      cache.max_len == 0 || s.total_len <= cache.max_len,
      fmt::format("the cache is full: it holds {} of max_len {} positions, and query adds {}",
                  cache.length, cache.max_len, s.tgt_len));
}

}  // namespace

detail::CachedCallShape detail::check_cached_call(const MultiheadAttentionImpl& m,
                                                  const KVCacheState& cache,
                                                  const AttentionCall& call) {
  RECORD_FUNCTION("mha::check_cached_call", std::vector<c10::IValue>());
  const Tensor &query = call.query, &key = call.key, &value = call.value;
  const Tensor &key_padding_mask = call.key_padding_mask, &attn_mask = call.attn_mask;
  check_cache_use(m, cache, call);
  // Ranks; attn_mask is checked below against the cached length.
  mha_shape_check(query, key.defined() ? key : query, value.defined() ? value : query,
                  key_padding_mask, Tensor(), m.options.num_heads());
  check_tensors(m, call);
  const CachedCallShape s = cached_call_shape(m, cache, call);
  check_sizes(s, cache, call);
  if (attn_mask.defined()) {
    check_attn_mask_shape(attn_mask, s.tgt_len, s.total_len, s.bsz * m.options.num_heads());
  }
  // Unbatched key_padding_mask (S) -> (1, S).
  const Tensor kpm =
      s.batched || !key_padding_mask.defined() ? key_padding_mask : key_padding_mask.unsqueeze(0);
  if (kpm.defined()) {
    check_key_padding_mask_shape(kpm, s.total_len, s.bsz);
  }
  return s;
}

detail::CachedCallShape detail::cached_call_shape(const MultiheadAttentionImpl& m,
                                                  const KVCacheState& cache,
                                                  const AttentionCall& call) {
  const Tensor &query = call.query, &key = call.key;
  CachedCallShape s;
  s.batched = query.dim() == 3;
  s.batch_first = !s.batched || m.options.batch_first();
  const int64_t seq_dim = s.batched && !s.batch_first ? 0 : 1;
  s.tgt_len = query.size(s.batched ? seq_dim : 0);
  s.bsz = s.batched ? query.size(1 - seq_dim) : 1;
  const int64_t src_len = key.defined() ? key.size(s.batched ? seq_dim : 0) : 0;
  if (cache.is_static) {
    s.total_len = cache.filled ? cache.length : src_len;
  } else {
    s.total_len = cache.length + s.tgt_len;
  }
  return s;
}

void detail::check_cached_attention(const MultiheadAttentionImpl& module,
                                    KVCache& cache,
                                    const Tensor& query,
                                    const Tensor& key_value,
                                    const Tensor& key_padding_mask) {
  check_cached_call(module, kv_cache_state(cache),
                    {query, key_value, key_value, key_padding_mask, Tensor(),
                     /*need_weights=*/false, /*average_attn_weights=*/true, /*is_causal=*/false});
}

}  // namespace mha
