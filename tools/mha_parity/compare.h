#pragma once

// Element-wise comparison of one C++ output with Python's, for the report.

#include <torch/types.h>

#include <string>

namespace mha {
namespace parity_tool {

/// How one output compares with Python's.
struct Comparison {
  std::string name;
  std::string actual_shape;
  std::string expected_shape;
  bool same_shape = false;
  double max_abs_error = 0.0;  ///< max |actual - expected| (NaN in both places counts as 0)
  double max_rel_error = 0.0;  ///< max |actual - expected| / |expected| over nonzero expected
  double rtol = 0.0;
  double atol = 0.0;
  bool allclose = false;  ///< torch::allclose(actual, expected, rtol, atol, equal_nan)
};

/// Compares in float64; NaNs match NaNs.
Comparison compare(const std::string& name,
                   const torch::Tensor& actual,
                   const torch::Tensor& expected,
                   double rtol,
                   double atol);

/// One report line, e.g.
/// "  output   shape [128, 4, 512]  max abs err 1.19e-07  max rel err 2.1e-06
/// allclose(rtol=1.3e-06, atol=1e-05): PASS"
std::string format_comparison(const Comparison& comparison);

}  // namespace parity_tool
}  // namespace mha
