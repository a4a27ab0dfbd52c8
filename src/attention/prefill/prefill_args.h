#pragma once

// Private: the prefill attention's operands as its kernels read them, and the
// kernels' entries, one per CPU capability object (prefill_attention.h is the
// tensor interface). No LibTorch header, as linear/panel_gemm/panel_gemm_args.h.

#include <cstdint>

#include "common/cpu_capability.h"

namespace mha {
namespace detail {

/// Key panels: 16 keys side by side for each feature (a head's keys (S, hd) ->
/// (S_pad / 16, hd, 16), zero keys past S up to a whole score tile's); value panels: 16 features of
/// each value side by side (a head's values (S, hd) -> (hd / 16, S, 16)). The
/// kernels lay out each head's panels themselves, in a buffer of their own.
inline constexpr int64_t kKeyPanelWidth = 16;

/// One call's operands as the kernels read them; strides in floats.
struct PrefillArgs {
  const float* q;  ///< (N, H, L, hd)
  const float* k;  ///< (N, H, S, hd)
  const float* v;  ///< (N, H, S, hd)
  float* out;      ///< (N, H, L, hd)
  int64_t heads, q_len, kv_len, head_dim;
  int64_t q_stride[3], k_stride[3], v_stride[3], out_stride[3];  ///< N, H, L (or S) strides
  float scale;
};

/// The kernels, one per capability object: query row tiles [begin, end) of
/// the flattened (N, H, ceil(L / 6)) tiles.
MHA_DECLARE_CAPABILITY_ENTRIES(prefill_attention,
                               const PrefillArgs& args,
                               int64_t begin,
                               int64_t end);

/// Query rows per tile.
inline constexpr int64_t kPrefillTileRows = 6;

}  // namespace detail
}  // namespace mha
