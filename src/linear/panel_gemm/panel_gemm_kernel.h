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

#include "linear/panel_gemm/panel_gemm.h"

namespace mha {
namespace detail {
namespace panel_gemm_kernel {
inline namespace CPU_CAPABILITY {

using Vec = at::vec::Vectorized<float>;

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

/// The capability this object's body was compiled for: "DEFAULT", "AVX2", "AVX512".
inline const char* compiled_for() { return C10_STRINGIZE(CPU_CAPABILITY); }

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

/// Rows [row, row + Rows) x panels [panel, panel + Panels) of the output.
template <int Rows, int Panels>
void tile(const PanelGemmArgs& a, int64_t row, int64_t panel) {
  constexpr int kAcc = Panels * kVecs;
  const int64_t in = a.in;
  const float* x = a.x + row * in;                       // (Rows, in)
  const float* w = a.panels + panel * in * kPanelWidth;  // (Panels, in, 16)
  Vec acc[Rows][kAcc];
  for (auto& r : acc) std::fill(r, r + kAcc, Vec(0.0f));
  for (int64_t k = 0; k < in; ++k) {
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
  const int64_t ldy = a.panel_count * kPanelWidth;
  for (int r = 0; r < Rows; ++r) {
    float* y = a.y + (row + r) * ldy + panel * kPanelWidth;
    for (int j = 0; j < kAcc; ++j) {
      Vec out = acc[r][j];
      if (a.bias != nullptr) out = out + Vec::loadu(a.bias + panel * kPanelWidth + j * Vec::size());
      activated(out, a.activation).store(y + j * Vec::size());
    }
  }
}

/// Rows [row, row + Rows) x panels [panel, panel + panels), panels <= 4.
template <int Rows>
void rows_at(const PanelGemmArgs& a, int64_t row, int64_t panel, int64_t panels) {
  constexpr int kPanels = panels_for(Rows);
  int64_t p = panel;
  for (; p + kPanels <= panel + panels; p += kPanels) tile<Rows, kPanels>(a, row, p);
  for (; p < panel + panels; ++p) tile<Rows, 1>(a, row, p);
}

/// The last `rows` rows (fewer than a tile) from `row` x the panels.
template <int... Rows>
void last_rows(const PanelGemmArgs& a,
               int64_t row,
               int64_t panel,
               int64_t panels,
               int64_t rows,
               std::integer_sequence<int, Rows...> /*1 less than each count*/) {
  ((rows == Rows + 1 ? rows_at<Rows + 1>(a, row, panel, panels) : void()), ...);
}

/// Every row x panel group `group` (kPanelGroup panels, fewer at the end).
inline void group(const PanelGemmArgs& a, int64_t group) {
  const int64_t panel = group * kPanelGroup;
  const int64_t panels = std::min<int64_t>(kPanelGroup, a.panel_count - panel);
  int64_t row = 0;
  for (; row + kTileRows <= a.rows; row += kTileRows) rows_at<kTileRows>(a, row, panel, panels);
  last_rows(a, row, panel, panels, a.rows - row, std::make_integer_sequence<int, kTileRows - 1>{});
}

/// Panel groups [begin, end).
inline void run(const PanelGemmArgs& a, int64_t begin, int64_t end) {
  for (int64_t g = begin; g < end; ++g) group(a, g);
}

}  // namespace CPU_CAPABILITY
}  // namespace panel_gemm_kernel
}  // namespace detail
}  // namespace mha

/// Defines the entry `name` and `name`_compiled_for of one capability object.
#define MHA_DEFINE_PANEL_GEMM_KERNEL(name)                                        \
  void mha::detail::name(const PanelGemmArgs& args, int64_t begin, int64_t end) { \
    panel_gemm_kernel::run(args, begin, end);                                     \
  }                                                                               \
  const char* mha::detail::name##_compiled_for() { return panel_gemm_kernel::compiled_for(); }
