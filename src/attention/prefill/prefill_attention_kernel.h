#pragma once

// Private: the body of the prefill attention, included once by each
// capability's object (prefill_attention_<capability>.cpp), compiled with that
// capability's flags and CPU_CAPABILITY macros, so ATen's Vectorized<float> is
// that width there. Per (sequence, head): its keys and values laid out in
// panels in the calling thread's buffer; then per tile of up to 6 query rows:
// the scores against every key (register tiles over the key panels), the
// softmax of each row in place, then the weighted sum of the values
// (register tiles over the value rows), divided by the row's sum.

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/macros/Macros.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention/prefill/prefill_args.h"
#include "common/capability_vec.h"
#include "common/cpu_capability.h"

namespace mha {
namespace detail {
namespace prefill_kernel {
inline namespace CPU_CAPABILITY {

/// Vectors per key panel (2 with AVX2 and the scalar body, 1 with AVX-512).
constexpr int kVecsPerPanel = static_cast<int>(kKeyPanelWidth) / Vec::size();
/// Key panels per score tile: 12 accumulators either way (6 rows x 2 vectors).
constexpr int kPanelsPerTile = 2 / kVecsPerPanel;
/// Keys per score tile: a head's keys are padded with zero keys to whole tiles.
constexpr int64_t kKeysPerTile = kPanelsPerTile * kKeyPanelWidth;
/// Accumulator vectors per row in both tiles.
constexpr int kRowVecs = 2;
/// Features per value tile (16 with AVX2, 32 with AVX-512).
constexpr int64_t kValueCols = kRowVecs * Vec::size();

/// s (Rows, s_pad) = scale * q (Rows, hd; rows `q_row` apart) x the head's keys
/// (their panels; scores past kv_len are 0 and never read).
template <int Rows>
void scores(const PrefillArgs& a,
            const float* q,
            int64_t q_row,
            const float* panels,
            float* s,
            int64_t s_pad) {
  const int64_t hd = a.head_dim;
  for (int64_t t = 0; t < s_pad / kKeysPerTile; ++t) {
    const float* w = panels + t * kPanelsPerTile * hd * kKeyPanelWidth;  // (panels, hd, 16)
    Vec acc[Rows][kRowVecs];
    for (auto& r : acc) std::fill(r, r + kRowVecs, Vec(0.0f));
    for (int64_t d = 0; d < hd; ++d) {
      Vec wd[kRowVecs];  // feature d of the tile's keys
      for (int p = 0; p < kPanelsPerTile; ++p) {
        for (int v = 0; v < kVecsPerPanel; ++v) {
          wd[p * kVecsPerPanel + v] =
              Vec::loadu(w + (p * hd + d) * kKeyPanelWidth + v * Vec::size());
        }
      }
      for (int r = 0; r < Rows; ++r) {
        const Vec x(q[r * q_row + d]);
        for (int j = 0; j < kRowVecs; ++j) acc[r][j] = at::vec::fmadd(x, wd[j], acc[r][j]);
      }
    }
    const Vec scale(a.scale);
    for (int r = 0; r < Rows; ++r) {
      for (int j = 0; j < kRowVecs; ++j) {
        (acc[r][j] * scale).store(s + r * s_pad + t * kKeysPerTile + j * Vec::size());
      }
    }
  }
}

/// s[0, n) -> exp(s - max s) in place (`exp_u20`, as ATen's flash attention);
/// returns 1 / their sum.
inline float softmax_row(float* s, int64_t n) {
  constexpr int64_t kV = Vec::size();
  float top = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  if (n >= kV) {
    Vec vmax = Vec::loadu(s);
    for (j = kV; j + kV <= n; j += kV) vmax = at::vec::maximum(vmax, Vec::loadu(s + j));
    top =
        at::vec::vec_reduce_all<float>([](Vec& x, Vec& y) { return at::vec::maximum(x, y); }, vmax);
  }
  for (; j < n; ++j) top = std::max(top, s[j]);
  return 1.0f / exp_and_sum</*kFastExp=*/true>(s, n, top);
}

/// out (Rows, hd; rows `out_row` apart) = p (Rows, s_pad) x the head's values
/// (their panels, (hd / 16, kv_len, 16)), each row times its `inv` (1 / its sum).
template <int Rows>
void weighted_values(const PrefillArgs& a,
                     const float* p,
                     int64_t s_pad,
                     const float* inv,
                     const float* panels,
                     float* out,
                     int64_t out_row) {
  for (int64_t c = 0; c < a.head_dim; c += kValueCols) {
    const float* vk[kRowVecs];  // where each vector's features [f, f + Vec::size()) start
    for (int k = 0; k < kRowVecs; ++k) {
      const int64_t f = c + k * Vec::size();
      vk[k] = panels + f / kKeyPanelWidth * a.kv_len * kKeyPanelWidth + f % kKeyPanelWidth;
    }
    Vec acc[Rows][kRowVecs];
    for (auto& r : acc) std::fill(r, r + kRowVecs, Vec(0.0f));
    for (int64_t j = 0; j < a.kv_len; ++j) {
      Vec vj[kRowVecs];  // value j's features [c, c + kValueCols)
      for (int k = 0; k < kRowVecs; ++k) vj[k] = Vec::loadu(vk[k] + j * kKeyPanelWidth);
      for (int r = 0; r < Rows; ++r) {
        const Vec weight(p[r * s_pad + j]);
        for (int k = 0; k < kRowVecs; ++k) acc[r][k] = at::vec::fmadd(weight, vj[k], acc[r][k]);
      }
    }
    for (int r = 0; r < Rows; ++r) {
      for (int k = 0; k < kRowVecs; ++k) {
        (acc[r][k] * Vec(inv[r])).store(out + r * out_row + c + k * Vec::size());
      }
    }
  }
}

/// One head's keys and values as the tiles read them, laid out by `lay_out`.
struct HeadPanels {
  std::vector<float> keys;    // (s_pad / 16, hd, 16), zeros past kv_len
  std::vector<float> values;  // (hd / 16, kv_len, 16)
};

/// (sequence n, head h)'s keys and values -> `panels`: whole key panels by
/// 16 x 16 transposes (16 rows loaded at once, so their misses overlap), the
/// last partial panel key by key; values row by row, each row's lines together.
inline void lay_out(const PrefillArgs& a, int64_t n, int64_t h, int64_t s_pad, HeadPanels& panels) {
  const int64_t hd = a.head_dim, len = a.kv_len, whole = len / kKeyPanelWidth * kKeyPanelWidth;
  const float* k = a.k + n * a.k_stride[0] + h * a.k_stride[1];  // (S, hd), rows k_stride[2] apart
  const float* v = a.v + n * a.v_stride[0] + h * a.v_stride[1];  // (S, hd), rows v_stride[2] apart
  float* keys = panels.keys.data();
  std::fill(keys + whole * hd, keys + s_pad * hd, 0.0f);  // the partial panel and the pad
  for (int64_t j = 0; j < whole; j += kKeyPanelWidth) {
    for (int64_t d = 0; d < hd; d += kKeyPanelWidth) {
      // keys [j, j + 16) x features [d, d + 16) -> (16 features, 16 keys) of panel j / 16
      at::vec::transpose_mxn<float, kKeyPanelWidth, kKeyPanelWidth>(
          k + j * a.k_stride[2] + d, a.k_stride[2], keys + j * hd + d * kKeyPanelWidth,
          kKeyPanelWidth);
    }
  }
  for (int64_t j = whole; j < len; ++j) {
    const float* key = k + j * a.k_stride[2];
    float* column = keys + whole * hd + j % kKeyPanelWidth;
    for (int64_t d = 0; d < hd; ++d) column[d * kKeyPanelWidth] = key[d];
  }
  float* values = panels.values.data();
  for (int64_t j = 0; j < len; ++j) {
    const float* row = v + j * a.v_stride[2];
    for (int64_t c = 0; c < hd / kKeyPanelWidth; ++c) {
      std::copy(row + c * kKeyPanelWidth, row + (c + 1) * kKeyPanelWidth,
                values + (c * len + j) * kKeyPanelWidth);
    }
  }
}

/// Query rows [row, row + Rows) of (sequence n, head h), whose keys and values
/// `panels` holds; `s` holds Rows x s_pad floats.
template <int Rows>
void tile(const PrefillArgs& a,
          int64_t n,
          int64_t h,
          int64_t row,
          const HeadPanels& panels,
          float* s,
          int64_t s_pad) {
  const float* q = a.q + n * a.q_stride[0] + h * a.q_stride[1] + row * a.q_stride[2];
  scores<Rows>(a, q, a.q_stride[2], panels.keys.data(), s, s_pad);
  float inv[Rows];
  for (int r = 0; r < Rows; ++r) inv[r] = softmax_row(s + r * s_pad, a.kv_len);
  float* out = a.out + n * a.out_stride[0] + h * a.out_stride[1] + row * a.out_stride[2];
  weighted_values<Rows>(a, s, s_pad, inv, panels.values.data(), out, a.out_stride[2]);
}

/// `tile<r>` at index r - 1: the tile of a call's last rows, fewer than 6.
inline constexpr decltype(&tile<1>) kTileOfRows[] = {tile<1>, tile<2>, tile<3>,
                                                     tile<4>, tile<5>, tile<6>};
static_assert(sizeof(kTileOfRows) / sizeof(kTileOfRows[0]) == kPrefillTileRows);

/// Row tiles [begin, end) of the flattened (N, H, ceil(L / 6)) tiles; each
/// head's panels laid out once per call (its tiles are consecutive).
inline void run(const PrefillArgs& a, int64_t begin, int64_t end) {
  const int64_t row_tiles = (a.q_len + kPrefillTileRows - 1) / kPrefillTileRows;
  const int64_t s_pad = (a.kv_len + kKeysPerTile - 1) / kKeysPerTile * kKeysPerTile;
  std::vector<float> s(kPrefillTileRows * s_pad);  // a tile's scores, then weights
  HeadPanels panels{std::vector<float>(s_pad * a.head_dim),
                    std::vector<float>(a.kv_len * a.head_dim)};
  int64_t laid_out = -1;  // the (n, h) pair whose panels `panels` holds
  for (int64_t item = begin; item < end; ++item) {
    const int64_t pair = item / row_tiles, row = item % row_tiles * kPrefillTileRows;
    const int64_t n = pair / a.heads, h = pair % a.heads;
    if (pair != laid_out) {
      lay_out(a, n, h, s_pad, panels);
      laid_out = pair;
    }
    const int64_t rows = std::min<int64_t>(kPrefillTileRows, a.q_len - row);
    kTileOfRows[rows - 1](a, n, h, row, panels, s.data(), s_pad);
  }
}

}  // namespace CPU_CAPABILITY
}  // namespace prefill_kernel
}  // namespace detail
}  // namespace mha

/// Defines the kernel entry `name` and `name`_compiled_for in the including
/// capability object.
#define MHA_DEFINE_PREFILL_ATTENTION_KERNEL(name) \
  MHA_DEFINE_RANGE_CAPABILITY_ENTRY(name, prefill_kernel, PrefillArgs)
