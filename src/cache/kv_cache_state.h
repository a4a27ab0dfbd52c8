#pragma once

// Private: the storage behind mha::KVCache and the operations
// `forward_cached` performs on it. Every write into the buffers runs under
// c10::InferenceMode: the buffers are inference tensors (allocated inside it),
// which may only be written inside it, whatever mode the caller is in.

#include <torch/types.h>

#include <cstdint>
#include <utility>

#include "mha/kv_cache.h"

namespace mha {
namespace detail {

struct KVCacheState {
  bool is_static = false;
  int64_t max_len = 0;   ///< fixed capacity when > 0 (self-attention caches)
  int64_t length = 0;    ///< cached key positions, extra rows not counted
  int64_t capacity = 0;  ///< key positions the buffers hold, extra rows not counted
  int64_t extra = 0;     ///< bias_k/bias_v row and zero row, stored after the keys
  bool filled = false;   ///< static: the memory has been projected
  const MultiheadAttentionImpl* owner = nullptr;  ///< the module that filled it
  torch::Tensor keys;                             ///< (N, H, capacity + extra, head_dim)
  torch::Tensor values;                           ///< (N, H, capacity + extra, head_dim)
  /// A filled static cache after `reorder`: batch row i reads buffer row
  /// rows[i] (int32 (batch,)), so beams share their source's memory; undefined:
  /// row i reads row i.
  torch::Tensor rows;
  /// Where `rows` is defined: the buffers gathered by it, (batch, H, length +
  /// extra, head_dim), made by the first masked or weighted call (the
  /// kernels other than the decode kernel read a row per query) and kept
  /// until the rows change.
  torch::Tensor gathered_keys, gathered_values;
  /// A growing cache after `reorder` within its batch: sequence i's position
  /// j is position j of buffer row position_rows[i][j] (int32 (batch,
  /// capacity + extra)), so beams share the past they have in common instead
  /// of copying it at every step. Positions from `length` on are written by
  /// each row into its own buffer row, where no sequence reads yet. The decode
  /// kernel reads through it in place; any other read settles it first
  /// (`settle_positions`). Undefined: row i.
  torch::Tensor position_rows;
};

/// The batch size the cache serves: its row map's, else its buffers'.
inline int64_t batch_of(const KVCacheState& state) {
  if (state.rows.defined()) return state.rows.size(0);
  return state.keys.defined() ? state.keys.size(0) : 0;
}

/// The layout of a cache's buffers: (bsz, num_heads, positions + extra, head_dim).
struct CacheLayout {
  int64_t bsz;
  int64_t num_heads;
  int64_t head_dim;
  int64_t extra;  ///< bias_k/bias_v row and zero row, stored after the keys
};

/// Makes room for `new_length` key positions in `layout`, with `options`'
/// dtype and device: allocates on first use (or when the batch or dtype
/// changed on an empty cache), grows by doubling when `max_len == 0`. Keeps
/// the cached positions.
void reserve(KVCacheState& state,
             const CacheLayout& layout,
             const torch::TensorOptions& options,
             int64_t new_length);

/// Writes `k`, `v` (N, H, L, head_dim) at positions [length, length + L), then
/// the extra rows (`bias_k`/`bias_v` (1, 1, E) if defined, a zero row if
/// `zero_attn`) right after them, and advances `length` by L. `reserve` first.
void append(KVCacheState& state,
            const torch::Tensor& k,
            const torch::Tensor& v,
            const torch::Tensor& bias_k,
            const torch::Tensor& bias_v,
            bool zero_attn);

/// Copies into each buffer row the positions its `position_rows` reads
/// elsewhere (the rows whose map is not their own), then drops the map: the
/// buffers hold every sequence in its own row again.
void settle_positions(KVCacheState& state);

/// The cached keys and values with their extra rows, (N, H, length + extra,
/// head_dim) views of the buffers (no copy).
std::pair<torch::Tensor, torch::Tensor> cached_views(const KVCacheState& state);

/// A cache with `rows`: its keys and values gathered by them, (batch, H,
/// length + extra, head_dim), gathered on the first call and kept.
std::pair<torch::Tensor, torch::Tensor> gathered_views(KVCacheState& state);

}  // namespace detail
}  // namespace mha
