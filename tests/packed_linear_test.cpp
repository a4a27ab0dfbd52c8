// The prepacked-weight GEMM (src/linear/packed_linear.h): which calls take it,
// that it agrees with at::linear within float32 rounding, the fallback without
// oneDNN's ops, packing once and again after every kind of change, and
// concurrent first calls.

#include "linear/packed_linear.h"

#include <gtest/gtest.h>
#include <mha/multihead_attention.h>
#include <mha/state_dict.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <thread>
#include <vector>

#include "support.h"
#include "tolerances.h"

namespace {

using mha::detail::packed_linear;
using mha::detail::PackedLinearOps;
using mha::detail::takes_packed_gemm;
using mha::test::bitwise_equal;
using mha::test::called;
using mha::test::ops_called;
using torch::Tensor;

constexpr const char* kPackOp = "mkldnn::_reorder_linear_weight";
constexpr const char* kPackedGemmOp = "mkldnn::_linear_pointwise";

/// at::linear's result and the packed GEMM's agree as float32 parity does.
void expect_close_to_linear(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b) {
  const Tensor expected = at::linear(x, w, b);
  const auto tol = mha::support::parity_tolerance(torch::kFloat);
  EXPECT_TRUE(torch::allclose(out, expected, tol.rtol, tol.atol))
      << "max |packed - linear| = " << (out - expected).abs().max().item<double>();
}

/// A (rows, 512) weight scaled as nn.Linear's init is (|w| ~ 1/sqrt(in)), so
/// that outputs are of order 1, as in a model.
Tensor weight(int64_t rows) { return torch::randn({rows, 512}) / std::sqrt(512.0); }

class PackedLinearTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!PackedLinearOps::onednn().available()) {
      GTEST_SKIP() << "this LibTorch has no " << kPackOp << " / " << kPackedGemmOp;
    }
    torch::manual_seed(0);
  }
  torch::NoGradGuard no_grad;
  Tensor w = weight(1536);  // (out, in): a packed in_proj_weight at E = 512
  Tensor b = torch::randn({1536});
};

TEST_F(PackedLinearTest, TakesThePackedGemmForItsRowsAndWeightsOnly) {
  const auto& ops = PackedLinearOps::onednn();
  for (int64_t rows : {1, 2, 7, 8, 64, 65, 256, 1024}) {
    const bool in_range =
        rows >= mha::detail::kPackedMinRows && rows <= mha::detail::kPackedMaxRows;
    EXPECT_EQ(takes_packed_gemm(ops, torch::randn({rows, 512}), w, b), in_range) << rows;
  }
  // (L, N, E): rows are L * N
  EXPECT_TRUE(takes_packed_gemm(ops, torch::randn({4, 4, 512}), w, b));
  EXPECT_FALSE(takes_packed_gemm(ops, torch::randn({8, 512}), torch::randn({512, 512}), {}))
      << "a (512 x 512) weight is faster unpacked below 16 rows";
  EXPECT_TRUE(takes_packed_gemm(ops, torch::randn({16, 512}), torch::randn({512, 512}), {}));
  EXPECT_FALSE(takes_packed_gemm(ops, torch::randn({16, 512}), torch::randn({256, 512}), {}));
  EXPECT_FALSE(takes_packed_gemm(ops, torch::randn({16, 512}, torch::kDouble), w.to(torch::kDouble),
                                 b.to(torch::kDouble)));
  EXPECT_FALSE(takes_packed_gemm(ops, torch::randn({512}), w, b)) << "1-D input";
}

TEST_F(PackedLinearTest, AgreesWithLinearWithinFloat32Rounding) {
  for (const auto& x : {torch::randn({16, 512}), torch::randn({8, 2, 512}),
                        torch::randn({2, 8, 512}).transpose(0, 1)}) {
    Tensor out;
    const auto ops = ops_called([&] { out = packed_linear(x, w, b); });
    EXPECT_TRUE(called(ops, kPackedGemmOp));
    EXPECT_FALSE(called(ops, "aten::linear"));
    EXPECT_EQ(out.sizes(), at::linear(x, w, b).sizes());
    expect_close_to_linear(out, x, w, b);
  }
  const Tensor x = torch::randn({16, 512});
  expect_close_to_linear(packed_linear(x, w, Tensor()), x, w, Tensor());  // no bias
}

TEST_F(PackedLinearTest, FallsBackToLinearWithoutTheOps) {
  const PackedLinearOps absent("mkldnn::_no_such_pack", "mkldnn::_no_such_linear");
  ASSERT_FALSE(absent.available());
  const Tensor x = torch::randn({16, 512});
  EXPECT_FALSE(takes_packed_gemm(absent, x, w, b));
  Tensor out;
  const auto ops = ops_called([&] { out = packed_linear(x, w, b, absent); });
  EXPECT_TRUE(called(ops, "aten::linear"));
  EXPECT_FALSE(called(ops, kPackedGemmOp));
  EXPECT_TRUE(bitwise_equal(out, at::linear(x, w, b)));
}

TEST_F(PackedLinearTest, OutsideItsRulesIsLinearBitForBit) {
  const Tensor one_row = torch::randn({1, 512});
  EXPECT_TRUE(bitwise_equal(packed_linear(one_row, w, b), at::linear(one_row, w, b)));
  const Tensor x = torch::randn({16, 512});
  {
    const mha::PythonKernelsGuard python_kernels(true);
    EXPECT_TRUE(bitwise_equal(packed_linear(x, w, b), at::linear(x, w, b)));
  }
  const torch::AutoGradMode grad_mode(true);
  const Tensor wg = w.clone().requires_grad_();
  const Tensor out = packed_linear(x, wg, b);
  ASSERT_TRUE(out.requires_grad()) << "a call that needs autograd runs at::linear";
  out.sum().backward();
  EXPECT_TRUE(torch::allclose(wg.grad(), x.sum(0).expand({1536, 512})));
}

TEST_F(PackedLinearTest, PacksOnceThenAgainAfterAnInPlaceEdit) {
  const Tensor x = torch::randn({16, 512});
  EXPECT_TRUE(called(ops_called([&] { packed_linear(x, w, b); }), kPackOp));
  EXPECT_FALSE(called(ops_called([&] { packed_linear(x, w, b); }), kPackOp));
  w.mul_(-1);  // an in-place edit: the version counter moves
  Tensor out;
  EXPECT_TRUE(called(ops_called([&] { out = packed_linear(x, w, b); }), kPackOp));
  expect_close_to_linear(out, x, w, b);
  // Views of one storage (the q, k and v rows of an in_proj_weight) are
  // packed each on its own, and an edit through one view reaches all.
  const Tensor stacked = weight(3072);
  const auto rows = [&](int64_t first) { return stacked.narrow(0, first, 1536); };
  expect_close_to_linear(packed_linear(x, rows(0), Tensor()), x, rows(0), Tensor());
  expect_close_to_linear(packed_linear(x, rows(1536), Tensor()), x, rows(1536), Tensor());
  stacked.narrow(0, 1536, 1).zero_();
  expect_close_to_linear(packed_linear(x, rows(1536), Tensor()), x, rows(1536), Tensor());
}

TEST_F(PackedLinearTest, NewStorageRepacksThroughSetDataAndDtypeChanges) {
  torch::nn::Linear linear(torch::nn::LinearOptions(512, 1536));
  const Tensor x = torch::randn({16, 512});
  expect_close_to_linear(linear(x), x, linear->weight, linear->bias);  // LibTorch's own forward
  expect_close_to_linear(packed_linear(x, linear->weight, linear->bias), x, linear->weight,
                         linear->bias);
  linear->weight.set_data(weight(1536));
  expect_close_to_linear(packed_linear(x, linear->weight, linear->bias), x, linear->weight,
                         linear->bias);
  linear->to(torch::kDouble);
  const Tensor xd = x.to(torch::kDouble);
  EXPECT_TRUE(bitwise_equal(packed_linear(xd, linear->weight, linear->bias),
                            at::linear(xd, linear->weight, linear->bias)));
  linear->to(torch::kFloat);
  linear->weight.mul_(-1);
  expect_close_to_linear(packed_linear(x, linear->weight, linear->bias), x, linear->weight,
                         linear->bias);
}

TEST_F(PackedLinearTest, ADeviceChangeRunsLinearOnTheNewDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const Tensor x = torch::randn({16, 512}, torch::kCUDA);
  const Tensor wc = w.to(torch::kCUDA), bc = b.to(torch::kCUDA);
  EXPECT_FALSE(takes_packed_gemm(PackedLinearOps::onednn(), x, wc, bc));
  EXPECT_TRUE(bitwise_equal(packed_linear(x, wc, bc), at::linear(x, wc, bc)));
}

TEST_F(PackedLinearTest, InferenceTensorWeightsRunLinear) {
  Tensor wi;
  {
    const c10::InferenceMode inference;
    wi = weight(1536);
  }
  const Tensor x = torch::randn({16, 512});
  EXPECT_FALSE(takes_packed_gemm(PackedLinearOps::onednn(), x, wi, b))
      << "an inference tensor has no version counter to tell an in-place edit";
  EXPECT_TRUE(bitwise_equal(packed_linear(x, wi, b), at::linear(x, wi, b)));
}

TEST_F(PackedLinearTest, DropsThePackedFormOfAWeightThatIsGone) {
  const int64_t before = mha::detail::packed_weight_count();
  {
    const Tensor temporary = weight(1536);
    packed_linear(torch::randn({16, 512}), temporary, Tensor());
    EXPECT_EQ(mha::detail::packed_weight_count(), before + 1);
  }
  EXPECT_EQ(mha::detail::packed_weight_count(), before);
}

TEST_F(PackedLinearTest, ConcurrentFirstCallsPackOnceAndAgree) {
  const Tensor fresh = weight(1536);
  const Tensor x = torch::randn({16, 512});
  const int64_t before = mha::detail::packed_weight_count();
  std::vector<Tensor> outs(8);
  std::vector<std::thread> threads;
  for (auto& out : outs) {
    threads.emplace_back([&] {
      const torch::NoGradGuard no_grad_here;
      out = packed_linear(x, fresh, b);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mha::detail::packed_weight_count(), before + 1);
  for (const auto& out : outs) EXPECT_TRUE(bitwise_equal(out, outs[0]));
  expect_close_to_linear(outs[0], x, fresh, b);
}

TEST_F(PackedLinearTest, AttentionAtSmallBatchesProjectsOnPackedWeights) {
  mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(512, 8).batch_first(true));
  attn->eval();
  const c10::InferenceMode inference;
  const Tensor x = torch::randn({1, 16, 512});  // (N, L, E): Python's fast path
  Tensor out;
  const auto ops = ops_called([&] { out = std::get<0>(attn->forward(x, x, x, {}, false)); });
  EXPECT_TRUE(called(ops, kPackedGemmOp)) << ::testing::PrintToString(ops);
  Tensor python;
  {
    const mha::PythonKernelsGuard python_kernels(true);
    const auto python_ops =
        ops_called([&] { python = std::get<0>(attn->forward(x, x, x, {}, false)); });
    EXPECT_FALSE(called(python_ops, kPackedGemmOp));
  }
  const auto tol = mha::support::parity_tolerance(torch::kFloat);
  EXPECT_TRUE(torch::allclose(out, python, tol.rtol, tol.atol))
      << "max |mha - Python's kernel| = " << (out - python).abs().max().item<double>();
}

/// One fast-path call of `attn` at (N, L) = (1, 16), and the same call with Python's kernels.
std::pair<Tensor, Tensor> packed_and_python_outputs(mha::MultiheadAttention& attn,
                                                    const Tensor& x) {
  const c10::InferenceMode inference;
  const Tensor packed = std::get<0>(attn->forward(x, x, x, {}, false));
  const mha::PythonKernelsGuard python_kernels(true);
  return {packed, std::get<0>(attn->forward(x, x, x, {}, false))};
}

TEST_F(PackedLinearTest, LoadingNewWeightsRepacks) {
  mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(512, 8).batch_first(true));
  mha::MultiheadAttention other(mha::MultiheadAttentionOptions(512, 8).batch_first(true));
  attn->eval();
  const Tensor x = torch::randn({1, 16, 512});  // (N, L, E)
  packed_and_python_outputs(attn, x);           // packs attn's weights
  const auto path = std::filesystem::temp_directory_path() / "mha_packed_linear_reload.pt";
  mha::save_state_dict(*other, path.string());
  mha::load_state_dict(*attn, path.string());  // copy_ into the parameters: new versions
  std::filesystem::remove(path);
  const auto [packed, python] = packed_and_python_outputs(attn, x);
  const auto tol = mha::support::parity_tolerance(torch::kFloat);
  EXPECT_TRUE(torch::allclose(packed, python, tol.rtol, tol.atol))
      << "max |mha - Python's kernel| = " << (packed - python).abs().max().item<double>();
}

}  // namespace
