// MultiheadAttentionImpl::forward_paged: the attention pipeline with a
// PagedKVCache as the key/value source. The new positions of several sequences,
// packed as rows, go through the checks and the projector's one entry together;
// each sequence's keys and values are written into its blocks and read back
// for its own attention (the causal mask aligned to the bottom right); one
// output projection. See docs/decoding.md.

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "attention/attention_call.h"
#include "attention/cached_attention.h"
#include "attention/input_checks.h"
#include "attention/masks.h"
#include "attention/projector.h"
#include "cache/paged_call_checks.h"
#include "cache/paged_kv_cache_state.h"
#include "common/shape_format.h"
#include "linear/int8_linear.h"
#include "mha/multihead_attention.h"
#include "mha/paged_kv_cache.h"

namespace mha {

using torch::Tensor;

namespace {

/// `offsets` (the argument `name`): num_seqs + 1 offsets from 0 to `total`,
/// non-decreasing, int32 or int64; returned on the host.
std::vector<int64_t> check_offsets(const Tensor& offsets,
                                   const char* name,
                                   size_t num_seqs,
                                   int64_t total) {
  TORCH_CHECK(offsets.defined(), "expected ", name, " to be a defined tensor");
  TORCH_CHECK_TYPE(offsets.scalar_type() == at::kInt || offsets.scalar_type() == at::kLong,
                   "expected ", name, " of dtype int32 or int64, but got ",
                   c10::toString(offsets.scalar_type()));
  TORCH_CHECK_VALUE(offsets.dim() == 1 && offsets.size(0) == static_cast<int64_t>(num_seqs) + 1,
                    fmt::format("expected {} of shape torch.Size([{}]) (num_seqs + 1), but got {}",
                                name, num_seqs + 1, detail::torch_size(offsets.sizes())));
  const Tensor host = offsets.to(at::kCPU, at::kLong).contiguous();
  const std::vector<int64_t> result(host.data_ptr<int64_t>(),
                                    host.data_ptr<int64_t>() + host.numel());
  TORCH_CHECK_VALUE(result.front() == 0 && result.back() == total,
                    fmt::format("expected {} to start at 0 and end at {} (the rows), but got {} "
                                "and {}",
                                name, total, result.front(), result.back()));
  for (size_t i = 0; i < num_seqs; ++i) {
    TORCH_CHECK_VALUE(result[i] <= result[i + 1],
                      fmt::format("expected non-decreasing {}, but {}[{}] = {} > {}[{}] = {}", name,
                                  name, i, result[i], name, i + 1, result[i + 1]));
  }
  return result;
}

/// A validated call's row offsets: the queries', and the new keys' (a self-
/// attention cache: the queries' own; a static one: the memories given).
struct Offsets {
  std::vector<int64_t> queries, keys;
};

void check_paged_inputs(const MultiheadAttentionImpl& m,
                        const detail::PagedKVCacheState& cache,
                        const detail::AttentionCall& call,
                        const Tensor& cu_seqlens_kv) {
  TORCH_CHECK(!m.is_training(),
              "forward_paged is for inference, but the module is in training mode; call "
              "module->eval()");
  TORCH_CHECK(cache.owner == &m,
              "the cache was made for another module; use one PagedKVCache per module");
  TORCH_CHECK(!m.bias_k.defined() && !m.options.add_zero_attn(),
              "forward_paged supports neither add_bias_kv nor add_zero_attn");
  TORCH_CHECK(call.query.defined(), "expected query to be a defined tensor");
  TORCH_CHECK(call.key.defined() == call.value.defined(),
              "expected key and value both defined or both undefined");
  TORCH_CHECK(call.key.defined() || cache.is_static,
              "expected key and value (the new positions) for a self-attention cache");
  TORCH_CHECK(cache.is_static || !cu_seqlens_kv.defined(),
              "cu_seqlens_kv is for a static_kv cache (a self-attention cache's keys are the "
              "queries' rows)");
  for (const auto& [t, name] : {std::pair<const Tensor&, const char*>{call.query, "query"},
                                {call.key, "key"},
                                {call.value, "value"}}) {
    TORCH_CHECK_VALUE(!t.defined() || t.dim() == 2,
                      fmt::format("expected {} of shape (rows, features): the sequences' rows one "
                                  "after another, but got {}",
                                  name, detail::torch_size(t.sizes())));
  }
  const int64_t key_rows = cache.is_static ? call.key.size(0) : call.query.size(0);
  TORCH_CHECK_VALUE(
      !call.key.defined() || (call.key.size(0) == key_rows && call.value.size(0) == key_rows),
      fmt::format("expected key and value of {} rows, but got {} and {}", key_rows,
                  call.key.size(0), call.value.size(0)));
  const Tensor& param = detail::Projector::first_weight(m);
  detail::check_dtypes_and_devices(param, call);
  detail::check_feature_sizes(m.options, call.query, call.key, call.value);
  TORCH_CHECK_TYPE(
      cache.keys.scalar_type() == param.scalar_type() && cache.keys.device() == param.device(),
      fmt::format("expected the cache's pool of dtype {} on {} to match the module's {} on {}; "
                  "the module was converted or moved after the cache was made (make a new "
                  "PagedKVCache)",
                  c10::toString(cache.keys.scalar_type()), cache.keys.device().str(),
                  c10::toString(param.scalar_type()), param.device().str()));
}

/// A static cache's memories: given once per sequence, before its queries.
void check_paged_memories(const detail::PagedKVCacheState& cache,
                          const std::vector<int64_t>& seq_ids,
                          const Offsets& offsets) {
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    const bool holds = cache.sequence(seq_ids[i]).length > 0;
    const bool given = offsets.keys[i + 1] > offsets.keys[i];
    TORCH_CHECK_VALUE(
        !(holds && given),
        fmt::format("sequence {} already holds its memory; give it 0 key rows", seq_ids[i]));
    TORCH_CHECK_VALUE(
        holds || given || offsets.queries[i + 1] == offsets.queries[i],
        fmt::format("sequence {} has no memory yet: give it as key/value rows", seq_ids[i]));
  }
}

/// Every check before any cache changes; returns the offsets.
Offsets check_paged(const MultiheadAttentionImpl& m,
                    const detail::PagedKVCacheState& cache,
                    const detail::AttentionCall& call,
                    const std::vector<int64_t>& seq_ids,
                    const Tensor& cu_seqlens,
                    const Tensor& cu_seqlens_kv) {
  check_paged_inputs(m, cache, call, cu_seqlens_kv);
  Offsets offsets;
  offsets.queries = check_offsets(cu_seqlens, "cu_seqlens", seq_ids.size(), call.query.size(0));
  if (!cache.is_static) {
    offsets.keys = offsets.queries;
  } else if (call.key.defined()) {
    offsets.keys = check_offsets(cu_seqlens_kv, "cu_seqlens_kv", seq_ids.size(), call.key.size(0));
  } else {
    offsets.keys.assign(seq_ids.size() + 1, 0);
  }
  std::vector<int64_t> new_positions;
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    new_positions.push_back(offsets.keys[i + 1] - offsets.keys[i]);
  }
  cache.check_room(seq_ids, new_positions);
  if (cache.is_static) check_paged_memories(cache, seq_ids, offsets);
  return offsets;
}

}  // namespace

void detail::check_paged_call(const MultiheadAttentionImpl& module,
                              PagedKVCache& cache,
                              const Tensor& query,
                              const Tensor& key,
                              const Tensor& value,
                              const std::vector<int64_t>& seq_ids,
                              const Tensor& cu_seqlens,
                              const Tensor& cu_seqlens_kv) {
  const Tensor none;
  const AttentionCall call{query, key, value, none, none, /*need_weights=*/false, true, false};
  check_paged(module, paged_kv_cache_state(cache), call, seq_ids, cu_seqlens, cu_seqlens_kv);
}

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward_paged(
    const Tensor& query,
    const Tensor& key,
    const Tensor& value,
    PagedKVCache& cache,
    const std::vector<int64_t>& seq_ids,
    const Tensor& cu_seqlens,
    const Tensor& cu_seqlens_kv) {
  detail::PagedKVCacheState& state = detail::paged_kv_cache_state(cache);
  const Tensor none;
  const detail::AttentionCall call{query, key,  value, none, none, /*need_weights=*/false,
                                   true,  false};
  const Offsets offsets = check_paged(*this, state, call, seq_ids, cu_seqlens, cu_seqlens_kv);

  // Everything is validated: from here on the cache changes.
  torch::NoGradGuard no_grad;
  const auto [q_rows, k_rows, v_rows] =  // (T, E'); (new key rows, E') or undefined
      detail::Projector::of(*this).project(query, key, value);
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
        state.append_and_read(seq_ids[i], rows_of(k), rows_of(v));
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
