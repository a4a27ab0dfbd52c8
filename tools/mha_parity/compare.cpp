#include "compare.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

namespace mha {
namespace parity_tool {

Comparison compare(const std::string& name,
                   const torch::Tensor& actual,
                   const torch::Tensor& expected,
                   double rtol,
                   double atol) {
  Comparison c;
  c.name = name;
  c.actual_shape = fmt::format("{}", fmt::streamed(actual.sizes()));
  c.expected_shape = fmt::format("{}", fmt::streamed(expected.sizes()));
  c.same_shape = actual.sizes() == expected.sizes();
  c.rtol = rtol;
  c.atol = atol;
  if (!c.same_shape) {
    return c;
  }
  const auto a = actual.detach().to(torch::kCPU, torch::kFloat64);
  const auto e = expected.detach().to(torch::kCPU, torch::kFloat64);
  const auto both_nan = a.isnan() & e.isnan();
  const auto diff = torch::where(both_nan, torch::zeros_like(a), (a - e).abs());
  if (a.numel() > 0) {
    c.max_abs_error = diff.max().item<double>();
    const auto nonzero = e != 0;
    c.max_rel_error =
        nonzero.any().item<bool>()
            ? (diff.masked_select(nonzero) / e.abs().masked_select(nonzero)).max().item<double>()
            : 0.0;
  }
  c.allclose = torch::allclose(a, e, rtol, atol, /*equal_nan=*/true);
  return c;
}

std::string format_comparison(const Comparison& c) {
  if (!c.same_shape) {
    return fmt::format("  {:<8} shape {} but Python's is {}: FAIL", c.name, c.actual_shape,
                       c.expected_shape);
  }
  return fmt::format(
      "  {:<8} shape {}  max abs err {:.3g}  max rel err {:.3g}  "
      "allclose(rtol={:g}, atol={:g}): {}",
      c.name, c.actual_shape, c.max_abs_error, c.max_rel_error, c.rtol, c.atol,
      c.allclose ? "PASS" : "FAIL");
}

}  // namespace parity_tool
}  // namespace mha
