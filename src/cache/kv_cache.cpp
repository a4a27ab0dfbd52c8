#include "mha/kv_cache.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <algorithm>

#include "cache/kv_cache_state.h"
#include "common/decode_dtypes.h"
#include "common/shape_format.h"

namespace mha {

using torch::Tensor;

namespace detail {

KVCacheState& kv_cache_state(KVCache& cache) { return *cache.state_; }

namespace {

/// First capacity of a growing cache: small prompts need no early regrowth.
constexpr int64_t kMinGrowingCapacity = 16;

/// The map of `bsz` sequences each in its own buffer row: int32 (bsz, positions).
Tensor own_rows(int64_t bsz, int64_t positions) {
  return at::arange(bsz, at::kInt).unsqueeze(1).expand({bsz, positions}).contiguous();
}

/// (N, H, capacity + extra, head_dim) buffers holding the first `keep` positions of `state`.
void reallocate(KVCacheState& state,
                const CacheLayout& layout,
                const torch::TensorOptions& options,
                int64_t capacity,
                int64_t keep) {
  const std::vector<int64_t> shape{layout.bsz, layout.num_heads, capacity + layout.extra,
                                   layout.head_dim};
  Tensor keys = at::empty(shape, options);
  Tensor values = at::empty(shape, options);
  if (keep > 0) {
    keys.narrow(2, 0, keep).copy_(state.keys.narrow(2, 0, keep));
    values.narrow(2, 0, keep).copy_(state.values.narrow(2, 0, keep));
  }
  state.keys = std::move(keys);
  state.values = std::move(values);
  if (state.position_rows.defined()) {  // the same positions, a wider map
    Tensor map = own_rows(layout.bsz, capacity + layout.extra);
    map.narrow(1, 0, keep).copy_(state.position_rows.narrow(1, 0, keep));
    state.position_rows = map;
  }
  state.capacity = capacity;
  state.extra = layout.extra;
}

/// `buffer` (N, H, capacity + extra, hd) with its batch entries selected by
/// `index` (N'): (N', H, capacity + extra, hd), only rows [0, `rows`)
/// copied. When N' = N, in place, copying only the entries that change
/// (beam search keeps most beams where they are).
Tensor select_filled(const Tensor& buffer, const Tensor& index, int64_t rows) {
  const Tensor filled = buffer.narrow(2, 0, rows);  // (N, H, rows, hd)
  if (index.size(0) == buffer.size(0)) {
    const Tensor moved = index.ne(at::arange(index.size(0), index.options())).nonzero().squeeze(1);
    if (moved.numel() > 0) {
      const Tensor sources =
          filled.index_select(0, index.index_select(0, moved));  // (M, H, rows, hd)
      filled.index_copy_(0, moved, sources);
    }
    return buffer;
  }
  Tensor out =
      at::empty({index.size(0), buffer.size(1), buffer.size(2), buffer.size(3)}, buffer.options());
  Tensor out_filled = out.narrow(2, 0, rows);
  at::index_select_out(out_filled, filled, 0, index);
  return out;
}

}  // namespace

void reserve(KVCacheState& state,
             const CacheLayout& layout,
             const torch::TensorOptions& options,
             int64_t new_length) {
  c10::InferenceMode inference;
  const bool reusable = state.keys.defined() && state.keys.size(0) == layout.bsz &&
                        state.keys.size(1) == layout.num_heads &&
                        state.keys.size(3) == layout.head_dim && state.extra == layout.extra &&
                        state.keys.dtype() == options.dtype() &&
                        state.keys.device() == options.device();
  if (!reusable) {
    // Only an empty cache gets here (forward_cached rejects a filled cache of another shape).
    const int64_t capacity = state.max_len > 0 ? state.max_len
                             : state.is_static ? new_length
                                               : std::max(new_length, kMinGrowingCapacity);
    reallocate(state, layout, options, capacity, /*keep=*/0);
  } else if (new_length > state.capacity) {
    // Fixed capacities are checked by forward_cached; this is growth or a new static memory.
    const int64_t capacity = std::max(new_length, state.is_static ? 0 : 2 * state.capacity);
    reallocate(state, layout, options, capacity, state.length);
  }
}

void append(KVCacheState& state,
            const Tensor& k,
            const Tensor& v,
            const Tensor& bias_k,
            const Tensor& bias_v,
            bool zero_attn) {
  c10::InferenceMode inference;
  const int64_t new_len = k.size(2);
  state.keys.narrow(2, state.length, new_len).copy_(k);
  state.values.narrow(2, state.length, new_len).copy_(v);
  int64_t row = state.length + new_len;
  if (bias_k.defined()) {
    const int64_t num_heads = state.keys.size(1);
    // (1, 1, E) -> (1, H, 1, head_dim), broadcast over the batch
    state.keys.narrow(2, row, 1).copy_(bias_k.view({1, num_heads, 1, -1}));
    state.values.narrow(2, row, 1).copy_(bias_v.view({1, num_heads, 1, -1}));
    ++row;
  }
  if (zero_attn) {
    state.keys.narrow(2, row, 1).zero_();
    state.values.narrow(2, row, 1).zero_();
  }
  if (state.position_rows.defined()) {  // each sequence wrote its own row
    state.position_rows.narrow(1, state.length, new_len + state.extra)
        .copy_(own_rows(state.keys.size(0), new_len + state.extra));
  }
  state.length += new_len;
}

void settle_positions(KVCacheState& state) {
  if (!state.position_rows.defined()) return;
  const c10::InferenceMode inference;
  const int64_t bsz = state.keys.size(0), positions = state.length + state.extra;
  const Tensor map = state.position_rows.narrow(1, 0, positions);  // (N, S) int32
  const Tensor moved = map.ne(own_rows(bsz, positions)).any(1).nonzero().squeeze(1);
  if (moved.numel() > 0) {
    const Tensor rows = map.index_select(0, moved).to(at::kLong);      // (M, S)
    const Tensor at_position = at::arange(positions, rows.options());  // (S)
    for (Tensor* buffer : {&state.keys, &state.values}) {
      const Tensor filled = buffer->narrow(2, 0, positions);  // (N, H, S, hd)
      // (M, S, H, hd): sequence m's position j from row rows[m][j]
      const Tensor gathered = filled.index({rows, torch::indexing::Slice(), at_position});
      filled.index_copy_(0, moved, gathered.permute({0, 2, 1, 3}));
    }
  }
  state.position_rows = Tensor();
}

std::pair<Tensor, Tensor> cached_views(const KVCacheState& state) {
  const int64_t rows = state.length + state.extra;
  return {state.keys.narrow(2, 0, rows), state.values.narrow(2, 0, rows)};
}

std::pair<Tensor, Tensor> gathered_views(KVCacheState& state) {
  if (!state.gathered_keys.defined()) {
    const auto [keys, values] = cached_views(state);  // (R, H, S + extra, hd)
    const c10::InferenceMode inference;
    state.gathered_keys = keys.index_select(0, state.rows);  // (N, H, S + extra, hd)
    state.gathered_values = values.index_select(0, state.rows);
  }
  return {state.gathered_keys, state.gathered_values};
}

}  // namespace detail

KVCache::KVCache(std::unique_ptr<detail::KVCacheState> state) : state_(std::move(state)) {}
KVCache::KVCache(KVCache&&) noexcept = default;
KVCache& KVCache::operator=(KVCache&&) noexcept = default;
KVCache::~KVCache() = default;

KVCache KVCache::self_attention(int64_t max_len) {
  TORCH_CHECK_VALUE(max_len >= 0,
                    fmt::format("expected max_len >= 0 (0: grow as needed), but got {}", max_len));
  auto state = std::make_unique<detail::KVCacheState>();
  state->max_len = max_len;
  return KVCache(std::move(state));
}

KVCache KVCache::static_kv() {
  auto state = std::make_unique<detail::KVCacheState>();
  state->is_static = true;
  return KVCache(std::move(state));
}

bool KVCache::is_static() const { return state_->is_static; }

int64_t KVCache::length() const { return state_->length; }

int64_t KVCache::capacity() const { return state_->capacity; }

int64_t KVCache::batch_size() const { return detail::batch_of(*state_); }

int64_t KVCache::memory_bytes() const {
  if (!state_->keys.defined()) {
    return 0;
  }
  return static_cast<int64_t>(state_->keys.nbytes() + state_->values.nbytes());
}

void KVCache::clear() {
  state_->length = 0;
  state_->filled = false;
  state_->owner = nullptr;
  state_->rows = state_->gathered_keys = state_->gathered_values = Tensor();
  state_->position_rows = Tensor();
}

void KVCache::reorder(const Tensor& index) {
  if (!state_->keys.defined()) {
    return;
  }
  TORCH_CHECK(index.defined(), "expected index to be a defined tensor, but got an undefined one");
  TORCH_CHECK_TYPE(
      index.scalar_type() == at::kLong && index.dim() == 1 && index.numel() > 0,
      fmt::format("expected index to be a non-empty 1-D int64 tensor, but got {} of shape {}",
                  c10::toString(index.scalar_type()), detail::torch_size(index.sizes())));
  TORCH_CHECK(index.device() == state_->keys.device(),
              fmt::format("expected index on the cache's device {}, but got {}",
                          state_->keys.device().str(), index.device().str()));
  const int64_t bsz = detail::batch_of(*state_);
  const int64_t lo = index.min().item<int64_t>(), hi = index.max().item<int64_t>();
  TORCH_CHECK_INDEX(
      lo >= 0 && hi < bsz,
      fmt::format(
          "expected index entries in [0, {}) (the cache's batch size), but got values in [{}, {}]",
          bsz, lo, hi));
  c10::InferenceMode inference;
  if (state_->is_static && state_->filled) {  // the memory stays; the rows read it anew
    const Tensor rows = state_->rows.defined() ? state_->rows.index_select(0, index) : index;
    state_->rows = rows.to(at::kInt).contiguous();
    state_->gathered_keys = state_->gathered_values = Tensor();
    return;
  }
  if (index.size(0) == bsz &&
      detail::decode_kernel_reads(state_->keys.scalar_type(),
                                  state_->keys.device())) {  // beams: a new map
    const int64_t positions = state_->capacity + state_->extra;
    const Tensor map =
        state_->position_rows.defined() ? state_->position_rows : detail::own_rows(bsz, positions);
    state_->position_rows = map.index_select(0, index);  // (N, capacity + extra)
    return;
  }
  detail::settle_positions(*state_);
  state_->keys = detail::select_filled(state_->keys, index, state_->length + state_->extra);
  state_->values = detail::select_filled(state_->values, index, state_->length + state_->extra);
}

}  // namespace mha
