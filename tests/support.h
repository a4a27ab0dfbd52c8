#pragma once

// Shared test helpers: seeding fixture, exception-message assertions and tensor
// comparison that reports where and by how much two tensors differ.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sstream>
#include <string>

namespace mha {
namespace test {

/// Seeds ATen's generator before each test (PyTorch's `SeedingFixture`).
struct SeedingFixture : public ::testing::Test {
  void SetUp() override { torch::manual_seed(0); }
};

/// Fails unless `statement` throws c10::Error whose message contains `substring`.
#define MHA_ASSERT_THROWS_WITH(statement, substring)                                         \
  do {                                                                                       \
    bool mha_thrown_ = false;                                                                \
    try {                                                                                    \
      (void)(statement);                                                                     \
    } catch (const c10::Error& e) {                                                          \
      mha_thrown_ = true;                                                                    \
      const std::string mha_message_ = e.what_without_backtrace();                           \
      ASSERT_NE(mha_message_.find(substring), std::string::npos)                             \
          << "error message:\n  " << mha_message_ << "\ndoes not contain:\n  " << substring; \
    }                                                                                        \
    ASSERT_TRUE(mha_thrown_) << "expected a c10::Error containing: " << substring;           \
  } while (false)

/// Skips a CUDA test without a GPU, unless MHA_REQUIRE_CUDA=1 (scripts/gpu_check.sh),
/// where a missing GPU is a failure.
#define MHA_SKIP_WITHOUT_CUDA()                                              \
  do {                                                                       \
    if (!torch::cuda::is_available()) {                                      \
      const char* mha_require_ = std::getenv("MHA_REQUIRE_CUDA");            \
      if (mha_require_ && std::string(mha_require_) == "1") {                \
        FAIL() << "CUDA is required (MHA_REQUIRE_CUDA=1) but not available"; \
      }                                                                      \
      GTEST_SKIP() << "CUDA is not available";                               \
    }                                                                        \
  } while (false)

/// Element-wise equality that treats NaN as equal to NaN (bit-for-bit parity).
inline bool bitwise_equal(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  return ((a == b) | (a.isnan() & b.isnan())).all().item<bool>();
}

/// Max |a - b| over finite pairs, with where it happens; NaN/inf must match exactly.
inline ::testing::AssertionResult tensors_close(const torch::Tensor& actual,
                                                const torch::Tensor& expected,
                                                double rtol,
                                                double atol) {
  std::ostringstream why;
  if (actual.sizes() != expected.sizes()) {
    why << "shape " << actual.sizes() << " vs expected " << expected.sizes();
    return ::testing::AssertionFailure() << why.str();
  }
  if (actual.scalar_type() != expected.scalar_type()) {
    why << "dtype " << actual.scalar_type() << " vs expected " << expected.scalar_type();
    return ::testing::AssertionFailure() << why.str();
  }
  if (actual.numel() == 0) return ::testing::AssertionSuccess();
  const auto a = actual.detach().to(torch::kFloat64).flatten();
  const auto e = expected.detach().to(torch::kFloat64).flatten();
  const auto close = torch::isclose(a, e, rtol, atol, /*equal_nan=*/true);
  const auto diff = torch::where(a.isfinite() & e.isfinite(), (a - e).abs(), torch::zeros_like(a));
  const double max_diff = diff.max().item<double>();
  if (close.all().item<bool>()) {
    return ::testing::AssertionSuccess() << "max abs diff " << max_diff;
  }
  const auto bad = (~close).nonzero().flatten();
  const int64_t first = bad[0].item<int64_t>();
  why << bad.numel() << " of " << a.numel() << " elements differ (rtol " << rtol << ", atol "
      << atol << "); max abs diff " << max_diff << " at flat index "
      << diff.argmax().item<int64_t>() << "; first: index " << first << " actual "
      << a[first].item<double>() << " expected " << e[first].item<double>();
  return ::testing::AssertionFailure() << why.str();
}

}  // namespace test
}  // namespace mha
