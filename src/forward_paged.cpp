// MultiheadAttentionImpl::forward_paged: the new positions of several
// sequences, packed as rows, projected together; each sequence's keys and
// values written into its blocks of a PagedKVCache and gathered back for its
// own attention (the causal mask aligned to the bottom right); one output
// projection. See docs/decoding.md.

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <limits>

#include "attention/attention_call.h"
#include "attention/input_checks.h"
#include "attention/projector.h"
#include "linear/int8_linear.h"
#include "mha/multihead_attention.h"
#include "mha/paged_kv_cache.h"
#include "paged_kv_cache_state.h"
#include "shape_format.h"

namespace mha {

using torch::Tensor;

namespace {

/// The checks of `cu_seqlens` against `num_seqs` and T; returns the offsets.
std::vector<int64_t> check_offsets(const Tensor& cu_seqlens, size_t num_seqs, int64_t total) {
  TORCH_CHECK(cu_seqlens.defined(), "expected cu_seqlens to be a defined tensor");
  TORCH_CHECK_TYPE(cu_seqlens.scalar_type() == at::kInt || cu_seqlens.scalar_type() == at::kLong,
                   "expected cu_seqlens of dtype int32 or int64, but got ",
                   c10::toString(cu_seqlens.scalar_type()));
  TORCH_CHECK_VALUE(
      cu_seqlens.dim() == 1 && cu_seqlens.size(0) == static_cast<int64_t>(num_seqs) + 1,
      fmt::format("expected cu_seqlens of shape torch.Size([{}]) (num_seqs + 1), but got {}",
                  num_seqs + 1, detail::torch_size(cu_seqlens.sizes())));
  const Tensor host = cu_seqlens.to(at::kCPU, at::kLong).contiguous();
  const std::vector<int64_t> offsets(host.data_ptr<int64_t>(),
                                     host.data_ptr<int64_t>() + host.numel());
  TORCH_CHECK_VALUE(
      offsets.front() == 0 && offsets.back() == total,
      fmt::format("expected cu_seqlens to start at 0 and end at {} (the query's rows), "
                  "but got {} and {}",
                  total, offsets.front(), offsets.back()));
  for (size_t i = 0; i < num_seqs; ++i) {
    TORCH_CHECK_VALUE(offsets[i] <= offsets[i + 1],
                      fmt::format("expected non-decreasing cu_seqlens, but cu_seqlens[{}] = {} > "
                                  "cu_seqlens[{}] = {}",
                                  i, offsets[i], i + 1, offsets[i + 1]));
  }
  return offsets;
}

/// Every check before any cache changes; returns the offsets.
std::vector<int64_t> check_call(const MultiheadAttentionImpl& m,
                                const detail::PagedKVCacheState& cache,
                                const detail::AttentionCall& call,
                                const std::vector<int64_t>& seq_ids,
                                const Tensor& cu_seqlens) {
  TORCH_CHECK(!m.is_training(),
              "forward_paged is for inference, but the module is in training mode; call "
              "module->eval()");
  TORCH_CHECK(cache.owner == &m,
              "the cache was made for another module; use one PagedKVCache "
              "per module");
  TORCH_CHECK(!m.bias_k.defined() && !m.options.add_zero_attn(),
              "forward_paged supports neither add_bias_kv nor add_zero_attn");
  detail::check_defined(call.query, call.key, call.value);
  for (const auto& [t, name] : {std::pair<const Tensor&, const char*>{call.query, "query"},
                                {call.key, "key"},
                                {call.value, "value"}}) {
    TORCH_CHECK_VALUE(t.dim() == 2, fmt::format("expected {} of shape (T, features): the new "
                                                "positions of the sequences as rows, but got {}",
                                                name, detail::torch_size(t.sizes())));
  }
  TORCH_CHECK_VALUE(
      call.key.size(0) == call.query.size(0) && call.value.size(0) == call.query.size(0),
      fmt::format("expected key and value with the query's {} rows, but got {} and {}",
                  call.query.size(0), call.key.size(0), call.value.size(0)));
  detail::check_dtypes_and_devices(detail::Projector::first_weight(m), call);
  detail::check_feature_sizes(m.options, call.query, call.key, call.value);
  const std::vector<int64_t> offsets =
      check_offsets(cu_seqlens, seq_ids.size(), call.query.size(0));
  std::vector<int64_t> new_positions;
  for (size_t i = 0; i < seq_ids.size(); ++i) new_positions.push_back(offsets[i + 1] - offsets[i]);
  cache.check_room(seq_ids, new_positions);
  return offsets;
}

/// The input projections of all rows: (T, E) each -> (T, H, head_dim).
std::tuple<Tensor, Tensor, Tensor> project(const MultiheadAttentionImpl& m,
                                           const detail::AttentionCall& call) {
  const int64_t heads = m.options.num_heads();
  auto split = [heads](const Tensor& x) { return x.unflatten(-1, {heads, -1}); };
  const detail::Projector projector = detail::Projector::of(m);
  if (projector.is_packed() && call.self_attention()) {
    const auto qkv = projector.self(call.query).chunk(3, -1);  // (T, 3E) -> 3 x (T, E)
    return {split(qkv[0]), split(qkv[1]), split(qkv[2])};
  }
  const auto parts = projector.parts();
  return {split(parts.linear(0, call.query)), split(parts.linear(1, call.key)),
          split(parts.linear(2, call.value))};
}

/// One sequence's attention: q (L, H, hd) over its pool rows (S,) -> (L, H * hd).
Tensor attend(const Tensor& q, const Tensor& keys, const Tensor& values, const Tensor& rows) {
  const int64_t new_len = q.size(0), total = rows.size(0);
  const Tensor k = keys.index_select(0, rows).transpose(0, 1).unsqueeze(0);    // (1, H, S, hd)
  const Tensor v = values.index_select(0, rows).transpose(0, 1).unsqueeze(0);  // (1, H, S, hd)
  std::optional<Tensor> mask;
  if (new_len > 1) {  // new query i sees key j iff j <= S - L + i
    mask =
        at::zeros({new_len, total}, q.options())
            .masked_fill_(
                at::ones({new_len, total}, q.options().dtype(at::kBool)).triu_(total - new_len + 1),
                -std::numeric_limits<double>::infinity());
  }
  const Tensor out = at::scaled_dot_product_attention(q.transpose(0, 1).unsqueeze(0), k, v, mask);
  return out.squeeze(0).transpose(0, 1).flatten(1);  // (1, H, L, hd) -> (L, E)
}

}  // namespace

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward_paged(
    const Tensor& query,
    const Tensor& key,
    const Tensor& value,
    PagedKVCache& cache,
    const std::vector<int64_t>& seq_ids,
    const Tensor& cu_seqlens) {
  detail::PagedKVCacheState& state = detail::paged_kv_cache_state(cache);
  const Tensor none;
  const detail::AttentionCall call{query, key,  value, none, none, /*need_weights=*/false,
                                   true,  false};
  const std::vector<int64_t> offsets = check_call(*this, state, call, seq_ids, cu_seqlens);

  // Everything is validated: from here on the cache changes.
  torch::NoGradGuard no_grad;
  const auto [q, k, v] = project(*this, call);  // (T, H, hd)
  std::vector<Tensor> outs;
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    const int64_t begin = offsets[i], new_len = offsets[i + 1] - offsets[i];
    if (new_len == 0) continue;
    const Tensor rows = state.grow(seq_ids[i], new_len);  // (S,), the new positions last
    const Tensor new_rows = rows.narrow(0, rows.size(0) - new_len, new_len);
    state.keys.index_copy_(0, new_rows, k.narrow(0, begin, new_len));
    state.values.index_copy_(0, new_rows, v.narrow(0, begin, new_len));
    outs.push_back(attend(q.narrow(0, begin, new_len), state.keys, state.values, rows));
  }
  const Tensor attended =
      outs.empty() ? at::empty({0, options.embed_dim()}, query.options()) : at::cat(outs);
  return {detail::linear(*out_proj, attended), Tensor()};  // (T, E)
}

}  // namespace mha
