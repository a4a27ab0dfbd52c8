#pragma once

// The parity tolerances: how far mha's numbers may be from Python's, per dtype.

#include <c10/core/ScalarType.h>

namespace mha {
namespace support {

/// `torch.allclose`-style bounds: |actual - expected| <= atol + rtol * |expected|.
struct Tolerance {
  double rtol;
  double atol;
};

/// The parity tolerance for `dtype`. float64 and float32 results are bitwise
/// equal to Python's on Python's own paths; these bounds only cover what a
/// different kernel may change (another machine's BLAS, mha's fused kernel,
/// the KV cache). For float16 and bfloat16 they are
/// `torch.testing.assert_close`'s rtol for the dtype, with atol one unit in
/// the last place at 1.0 (2^-10 and 2^-7), since values near 0 round as
/// coarsely.
inline Tolerance parity_tolerance(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Double:
      return {0.0, 1e-10};
    case c10::ScalarType::Half:
      return {1e-3, 1.0 / 1024};
    case c10::ScalarType::BFloat16:
      return {1.6e-2, 1.0 / 128};
    default:
      return {1e-4, 1e-5};
  }
}

}  // namespace support
}  // namespace mha
