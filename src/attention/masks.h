#pragma once

// Private: every mask of the attention paths, in one place: Python's
// canonicalisation (`_canonical_mask`) and merging (`MultiheadAttention.merge_masks`),
// the bool forms mha's own kernels use, and the one causal-mask builder.

#include <c10/core/ScalarType.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace mha {
namespace detail {

/// Python's `F._canonical_mask`: a bool `mask` becomes additive (`true` ->
/// -inf) of `target_type`, a float one stays, other dtypes are rejected naming
/// `mask_name`; a dtype other than `other`'s (the other mask's dtype and name,
/// when Python checks it) warns once per process.
torch::Tensor canonical_mask(
    const torch::Tensor& mask,
    const std::string& mask_name,
    c10::ScalarType target_type,
    const std::optional<std::pair<c10::ScalarType, std::string>>& other = std::nullopt);

/// Python's `_canonical_mask(key_padding_mask, "key_padding_mask",
/// _none_or_dtype(attn_mask), "attn_mask", target_type)`: bool becomes
/// additive (`true` -> -inf) of `target_type`, float stays, other dtypes are
/// rejected, and a dtype other than `attn_mask`'s warns (once per process).
/// `names` are the caller's argument names (key padding mask, attn mask).
torch::Tensor canonical_key_padding_mask(const torch::Tensor& key_padding_mask,
                                         const torch::Tensor& attn_mask,
                                         c10::ScalarType target_type,
                                         std::pair<const char*, const char*> names = {
                                             "key_padding_mask", "attn_mask"});

/// Python's `_canonical_mask(attn_mask, name, None, "", target_type, False)`.
torch::Tensor canonical_attn_mask(const torch::Tensor& attn_mask,
                                  c10::ScalarType target_type,
                                  const char* name = "attn_mask");

/// Python's `MultiheadAttention.merge_masks` on canonical (float) masks, as
/// Python's fast paths (the module's and `TransformerEncoderLayer`'s) call it:
/// `key_padding_mask` (N, S) alone is type 1; any `attn_mask` ((L, L) or
/// (N * H, L, L)) is expanded to (N, H, L, L), plus the padding mask, type 2.
/// `query` is (N, L, E). Returns (merged mask, mask type), both empty without masks.
std::pair<std::optional<torch::Tensor>, std::optional<int64_t>> merge_masks(
    const torch::Tensor& attn_mask,
    const torch::Tensor& key_padding_mask,
    const torch::Tensor& query,
    int64_t num_heads);

/// The bool masks (true = masked out) of a self-attention call merged into one
/// bool mask broadcastable to (N, H, L, L): attn_mask (L, L) -> (1, 1, L, L)
/// or (N * H, L, L) -> (N, H, L, L), key_padding_mask (N, L) -> (N, 1, 1, L).
/// Undefined if both are.
torch::Tensor merged_bool_mask(const torch::Tensor& attn_mask,
                               const torch::Tensor& key_padding_mask,
                               int64_t bsz,
                               int64_t num_heads,
                               int64_t seq_len);

/// The causal mask of every path, bool (true = masked out), (queries, keys):
/// the queries are the last `queries` of `keys` positions, so query i sees
/// key j iff j <= keys - queries + i (aligned to the bottom right, as a cached
/// step needs); square (queries == keys) it is Python's
/// `generate_square_subsequent_mask` as a bool mask.
torch::Tensor causal_mask(int64_t queries, int64_t keys, const at::TensorOptions& options);

/// A bool mask (true = masked out) as an additive one of `options`: -inf where
/// masked, 0 elsewhere; undefined stays undefined.
torch::Tensor additive_mask(const torch::Tensor& masked, const at::TensorOptions& options);

/// `F.pad(mask, (0, columns))`: visible (0.0) columns for appended keys;
/// undefined stays undefined.
torch::Tensor pad_visible_keys(const torch::Tensor& mask, int64_t columns = 1);

/// The sizes of a cached call's mask: N, H, the new queries (L_new), the
/// keys after the call (S), and the always-visible key rows after them
/// (`bias_k`/`bias_v`'s, `add_zero_attn`'s).
struct CachedMaskSizes {
  int64_t batch;
  int64_t heads;
  int64_t new_len;
  int64_t total_len;
  int64_t extra;
};

/// The additive mask of a call over a KVCache's keys, of `options`' dtype and
/// device, (1 or N, 1 or H, L_new, S + extra), or undefined when nothing is
/// masked: `attn_mask` (L_new, S) or (N * H, L_new, S), plus for a
/// `self_attention` cache's prompt chunk (L_new > 1) the bottom-right causal
/// mask (new query i sees key j iff j <= S - L_new + i), plus the
/// `key_padding_mask` (N, S); the extra columns always visible.
torch::Tensor cached_call_mask(const torch::Tensor& key_padding_mask,
                               const torch::Tensor& attn_mask,
                               bool self_attention,
                               const CachedMaskSizes& sizes,
                               const at::TensorOptions& options);

}  // namespace detail
}  // namespace mha
