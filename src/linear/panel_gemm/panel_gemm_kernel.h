#pragma once

// Private: the body of the panel GEMM, included once by each capability's
// object (panel_gemm_<capability>.cpp), compiled with that capability's flags
// and CPU_CAPABILITY macros, so ATen's Vectorized<float> is that width there.
// A tile is `Rows` input rows by `Panels` panels: its accumulators stay in
// vector registers while the panels stream by, one input feature at a time.
// Everything here is in the inline namespace CPU_CAPABILITY, as ATen's own
// vec code (one mangled name per object).

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/macros/Macros.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/capability_vec.h"
#include "common/cpu_capability.h"
#include "linear/panel_gemm/panel_gemm_args.h"

namespace mha {
namespace detail {
namespace panel_gemm_kernel {
inline namespace CPU_CAPABILITY {

/// Vectors per panel row (1 with AVX-512, 2 with AVX2 and the scalar body).
constexpr int kVecs = static_cast<int>(kPanelWidth) / Vec::size();
/// Vector registers a tile may fill: its accumulators and one input
/// feature's weights of each panel (32 with AVX-512, 16 otherwise; one for
/// the broadcast input and one spare).
constexpr int kTileRegisters = (Vec::size() >= 16 ? 32 : 16) - 2;

/// Panels per tile of `rows` rows: the most of 4, 2, 1 whose accumulators
/// and weights fit the registers (more panels: more independent sums to
/// hide the FMA latency, and each input value reused more).
constexpr int panels_for(int rows) {
  for (int panels : {4, 2}) {
    if (panels * kVecs * (rows + 1) <= kTileRegisters) return panels;
  }
  return 1;
}

/// Rows of a full tile: 6, with 4 panels at AVX-512 (24 accumulators: each
/// input value broadcast once for 4 panels, each weight vector used 6 times;
/// faster than 12 rows x 2 panels from 16 rows on, the same below), with 1
/// panel (12 accumulators) otherwise.
constexpr int kTileRows = 6;

/// Input features summed in registers before the sum is added to the output:
/// a float32 sum of `in` products then rounds at most kSumBlock + in /
/// kSumBlock times on its way instead of `in` (BERT-base's 3,072-feature
/// projection: 268 instead of 3,072), at a load and a store per accumulator
/// and block.
constexpr int64_t kSumBlock = 256;

/// `out` after `activation`: ReLU, or the exact (erf) GELU as at::gelu's
/// default, x * 0.5 * (1 + erf(x / sqrt(2))).
inline Vec activated(const Vec& out, FusedActivation activation) {
  switch (activation) {
    case FusedActivation::kReLU:
      return at::vec::clamp_min(out, Vec(0.0f));
    case FusedActivation::kGELU:
      return out * Vec(0.5f) * (Vec(1.0f) + (out * Vec(static_cast<float>(M_SQRT1_2))).erf());
    case FusedActivation::kNone:
      break;
  }
  return out;
}

/// What a tile prefetches into L2 while it runs: from `next` on, `step` floats
/// per input feature (a slice of the next panel group), as the line at each
/// step and the line `second` floats after it (kPanelWidth where a step spans
/// more than a line, else 0: the same line again, so the loop has no branch);
/// the tile after it prefetches from `slice` floats further on. A prefetch is a
/// hint: the last tile's lines past the group's end (or the panels') read nothing.
struct Prefetch {
  const float* next;
  int64_t step, second, slice;
};

/// Rows [row, row + Rows) x panels [panel, panel + Panels) of the output:
/// each block of kSumBlock input features summed in registers from zero, in
/// input order, then added to the blocks before it in the output, in order;
/// after the last block the bias and activation.
template <int Rows, int Panels>
void tile(const PanelGemmArgs& a, int64_t row, int64_t panel, const Prefetch& prefetch) {
  constexpr int kAcc = Panels * kVecs;
  const int64_t in = a.in;
  const int64_t ldy = a.panel_count * kPanelWidth;
  const float* x = a.x + row * in;                       // (Rows, in)
  const float* w = a.panels + panel * in * kPanelWidth;  // (Panels, in, 16)
  float* y = a.y + row * ldy + panel * kPanelWidth;      // (Rows, Panels * 16) of (M, ldy)
  const int64_t blocks = std::max<int64_t>(1, (in + kSumBlock - 1) / kSumBlock);  // 1 at in = 0
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t k0 = b * kSumBlock, k1 = std::min(in, k0 + kSumBlock);
    Vec acc[Rows][kAcc];
    for (auto& r : acc) std::fill(r, r + kAcc, Vec(0.0f));
    for (int64_t k = k0; k < k1; ++k) {
      __builtin_prefetch(prefetch.next + k * prefetch.step, 0, 2);
      __builtin_prefetch(prefetch.next + k * prefetch.step + prefetch.second, 0, 2);
      Vec wk[kAcc];  // input feature k's weights in each panel
      for (int p = 0; p < Panels; ++p) {
        for (int v = 0; v < kVecs; ++v) {
          wk[p * kVecs + v] = Vec::loadu(w + (p * in + k) * kPanelWidth + v * Vec::size());
        }
      }
      for (int r = 0; r < Rows; ++r) {
        const Vec xr(x[r * in + k]);
        for (int j = 0; j < kAcc; ++j) acc[r][j] = at::vec::fmadd(xr, wk[j], acc[r][j]);
      }
    }
    for (int r = 0; r < Rows; ++r) {
      for (int j = 0; j < kAcc; ++j) {
        float* out_at = y + r * ldy + j * Vec::size();
        Vec out = b == 0 ? acc[r][j] : Vec::loadu(out_at) + acc[r][j];
        if (b + 1 == blocks) {
          if (a.bias != nullptr)
            out = out + Vec::loadu(a.bias + panel * kPanelWidth + j * Vec::size());
          out = activated(out, a.activation);
        }
        out.store(out_at);
      }
    }
  }
}

/// Rows [row, row + Rows) x panels [panel, panel + panels), panels <= 4.
template <int Rows>
void rows_at(
    const PanelGemmArgs& a, int64_t row, int64_t panel, int64_t panels, Prefetch& prefetch) {
  constexpr int kPanels = panels_for(Rows);
  int64_t p = panel;
  for (; p + kPanels <= panel + panels; p += kPanels) {
    tile<Rows, kPanels>(a, row, p, prefetch);
    prefetch.next += prefetch.slice;
  }
  for (; p < panel + panels; ++p) {
    tile<Rows, 1>(a, row, p, prefetch);
    prefetch.next += prefetch.slice;
  }
}

/// Tiles of `rows` rows (at most a tile's) that `panels` panels take.
constexpr int64_t tiles_for(int64_t rows, int64_t panels) {
  const int64_t per_tile = panels_for(static_cast<int>(rows));
  return panels / per_tile + panels % per_tile;
}

/// The last `rows` rows (fewer than a tile) from `row` x the panels.
template <int... Rows>
void last_rows(const PanelGemmArgs& a,
               int64_t row,
               int64_t panel,
               int64_t panels,
               int64_t rows,
               Prefetch& prefetch,
               std::integer_sequence<int, Rows...> /*1 less than each count*/) {
  ((rows == Rows + 1 ? rows_at<Rows + 1>(a, row, panel, panels, prefetch) : void()), ...);
}

/// How a group's rows are cut into tiles: `full` tiles of kTileRows rows, then
/// up to two tiles of `tail` rows (0: none). A last tile of 3 or 4 rows after a
/// full one holds 6 or 8 accumulators with AVX2, too few to hide the FMA's
/// latency (5 cycles on 2 pipes): it takes as long as a 5-row tile. So the
/// last 9 or 10 rows run as 5 + 4 or 5 + 5 rows, 10 cycles a feature instead
/// of 11 (16 rows: 16 instead of 17). Each output's sum is the same either way.
struct RowSplit {
  int64_t full;
  int64_t tail[2];
};

constexpr RowSplit split_rows(int64_t rows) {
  const int64_t full = rows / kTileRows, last = rows % kTileRows;
  if (full > 0 && (last == 3 || last == 4)) return {full - 1, {5, last + 1}};
  return {full, {last, 0}};
}

/// Tiles from which a group prefetches the next one: 3. A tile prefetches up
/// to two lines per input feature, so 3 tiles cover the next group's 4 panels.
/// With AVX-512 a tile holds the group's 4 panels, so this takes 3 row tiles
/// (13 rows and more): BERT-base at 16 tokens, weights streamed from memory,
/// took 0.92-0.93x the time with one line from 3 tiles than from 4 tiles on an
/// AMD Zen 4 (bench/results/prefetch-2026-12-06-zen4.md), and 0.90x / 0.84x
/// (1 / 2 threads) again with the second line
/// (bench/results/prefetch-2026-12-06b-zen4.md); with fewer rows the call is
/// bound by the weights' reads there, which the hardware prefetcher streams
/// well enough (bench/results/panel-gemm-2026-12-05-prefetch.md).
/// With AVX2 a tile of 3-6 rows holds one panel, so from 3 rows on: 12 rows
/// on an AVX2 EPYC, weights streamed from memory, 40 -> 66 GFLOP/s on 1
/// thread (bench/results/panel-gemm-2026-12-05-epyc-prefetch.md).
constexpr int64_t kPrefetchingTiles = 3;

/// Every row x panel group `group` (kPanelGroup panels, fewer at the end).
/// With `prefetch_next` and at least kPrefetchingTiles tiles, the tiles
/// prefetch the next group's weights into L2, a slice each, so that they
/// stream in from memory while this group computes from L2: the group's first
/// tile otherwise waits on memory and the rest on the FMAs, one after the other.
inline void group(const PanelGemmArgs& a, int64_t group, bool prefetch_next) {
  const int64_t panel = group * kPanelGroup;
  const int64_t panels = std::min<int64_t>(kPanelGroup, a.panel_count - panel);
  const float* weights = a.panels + panel * a.in * kPanelWidth;  // (panels, in, 16)
  const RowSplit split = split_rows(a.rows);
  int64_t tiles = split.full * tiles_for(kTileRows, panels);
  for (int64_t rows : split.tail) tiles += rows > 0 ? tiles_for(rows, panels) : 0;
  const int64_t next_floats =
      prefetch_next && tiles >= kPrefetchingTiles
          ? std::min<int64_t>(kPanelGroup, a.panel_count - panel - panels) * a.in * kPanelWidth
          : 0;
  Prefetch prefetch{weights, 0, 0, 0};  // without a next group: a line this group reads anyway
  if (next_floats > 0) {
    const int64_t slice = (next_floats + tiles - 1) / tiles;  // floats per tile
    const int64_t step = std::min<int64_t>(2 * kPanelWidth, (slice + a.in - 1) / a.in);
    prefetch = {weights + panels * a.in * kPanelWidth, step, step > kPanelWidth ? kPanelWidth : 0,
                slice};
  }
  int64_t row = 0;
  for (int64_t t = 0; t < split.full; ++t, row += kTileRows) {
    rows_at<kTileRows>(a, row, panel, panels, prefetch);
  }
  for (int64_t rows : split.tail) {
    last_rows(a, row, panel, panels, rows, prefetch,
              std::make_integer_sequence<int, kTileRows - 1>{});
    row += rows;
  }
}

/// Panel groups [begin, end), each prefetching the next one of the range.
inline void run(const PanelGemmArgs& a, int64_t begin, int64_t end) {
  for (int64_t g = begin; g < end; ++g) group(a, g, g + 1 < end);
}

}  // namespace CPU_CAPABILITY
}  // namespace panel_gemm_kernel
}  // namespace detail
}  // namespace mha

/// Defines the kernel entry `name` and `name`_compiled_for in the including
/// capability object.
#define MHA_DEFINE_PANEL_GEMM_KERNEL(name) \
  MHA_DEFINE_RANGE_CAPABILITY_ENTRY(name, panel_gemm_kernel, PanelGemmArgs)
