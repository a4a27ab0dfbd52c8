#pragma once

// Shared test helpers: seeding fixture, exception-message assertions and tensor
// comparison that reports where and by how much two tensors differ.

#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

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

/// Bit-for-bit parity: the same shape, dtype and bit pattern in every element
/// (so -0.0 differs from 0.0), except that any NaN equals any NaN.
inline bool bitwise_equal(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  if (!a.is_floating_point()) return torch::equal(a, b);
  const auto bits = a.element_size() == 8   ? torch::kInt64
                    : a.element_size() == 4 ? torch::kInt32
                                            : torch::kInt16;
  const auto same = a.detach().contiguous().view(bits) == b.detach().contiguous().view(bits);
  return (same | (a.isnan() & b.isnan())).all().item<bool>();
}

/// The names of the ATen ops `call` runs on this thread, in order (e.g.
/// "aten::_native_multi_head_attention"), recorded with a RecordFunction callback.
inline std::vector<std::string> ops_called(const std::function<void()>& call) {
  static thread_local std::vector<std::string>* sink = nullptr;
  std::vector<std::string> names;
  sink = &names;
  const auto handle = at::addThreadLocalCallback(at::RecordFunctionCallback(
      [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        if (sink) sink->emplace_back(fn.name());
        return nullptr;
      }));
  call();
  at::removeCallback(handle);
  sink = nullptr;
  return names;
}

/// Whether `op` is among `ops` (from `ops_called`).
inline bool called(const std::vector<std::string>& ops, const std::string& op) {
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

/// A parity case's name, and whether it runs with Python's kernels
/// (`mha::PythonKernelsGuard`): the suites run every case both ways.
using ParityParam = std::tuple<std::string, bool>;

/// Every case of `names`, with mha's kernels and with Python's.
inline auto both_kernel_choices(const std::vector<std::string>& names) {
  return ::testing::Combine(::testing::ValuesIn(names), ::testing::Bool());
}

/// A ParityParam's test name: the case's, "_PythonKernels" appended with Python's kernels.
inline std::string parity_test_name(const ::testing::TestParamInfo<ParityParam>& info) {
  return std::get<0>(info.param) + (std::get<1>(info.param) ? "_PythonKernels" : "");
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
