// Sequence-first inference calls ((L, N, E), nn.MultiheadAttention's default
// layout) that Python computes with its functional steps only because the
// module is not batch_first: mha's fused kernel on their (N, L, E) view,
// within float32 rounding of Python's steps (`mha::PythonKernelsGuard` gives
// Python's bits back), at E = 512.

#include <gtest/gtest.h>
#include <mha/mha.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "attention/call_plan.h"
#include "support.h"
#include "tolerances.h"

namespace {

using mha::test::called;
using mha::test::ops_called;
using torch::Tensor;

/// One call's arguments and its name.
struct Case {
  std::string name;
  Tensor key_padding_mask, attn_mask;
  bool is_causal = false;
};

class SequenceFirst : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(0);
    attn = mha::MultiheadAttention(mha::MultiheadAttentionOptions(512, 8));  // sequence-first
    attn->eval();
  }

  /// The call's plan, its output with mha's kernels and with Python's.
  void check(const Case& c, const Tensor& x) {
    const torch::NoGradGuard no_grad;
    const mha::detail::AttentionCall call{x,           x,     x,    c.key_padding_mask,
                                          c.attn_mask, false, true, c.is_causal};
    const auto plan = mha::detail::plan_call(*attn, call);
    EXPECT_TRUE(plan.sequence_first) << c.name << ": " << plan.why_not_fast_path;
    EXPECT_EQ(plan.kernel, mha::detail::AttentionKernel::kFused) << c.name;
    const auto run = [&] {
      return std::get<0>(attn->forward(x, x, x, c.key_padding_mask, /*need_weights=*/false,
                                       c.attn_mask, true, c.is_causal));
    };
    const Tensor ours = run();
    Tensor python;
    {
      const mha::PythonKernelsGuard python_kernels(true);
      EXPECT_FALSE(mha::detail::plan_call(*attn, call).sequence_first);
      python = run();
    }
    ASSERT_EQ(ours.sizes(), x.sizes()) << c.name;
    const auto tol = mha::support::parity_tolerance(torch::kFloat);
    EXPECT_TRUE(torch::allclose(ours, python, tol.rtol, tol.atol, /*equal_nan=*/true))
        << c.name
        << ": max |mha - Python| = " << (ours - python).nan_to_num().abs().max().item<double>();
    EXPECT_TRUE(torch::equal(ours.isnan(), python.isnan())) << c.name;
  }

  mha::MultiheadAttention attn{nullptr};
};

TEST_F(SequenceFirst, InferenceCallsWithoutWeightsTakeTheFusedKernel) {
  const int64_t L = 16, N = 3;
  Tensor kpm = torch::zeros({N, L}, torch::kBool);
  kpm[1].narrow(0, 10, 6).fill_(true);
  Tensor dead = kpm.clone();
  dead[2].fill_(true);  // a sequence with no key: NaN, as Python's softmax gives
  const Tensor causal = torch::ones({L, L}, torch::kBool).triu(1);
  const std::vector<Case> cases = {
      {"NoMask", {}, {}},
      {"KeyPaddingMask", kpm, {}},
      {"AttnMask2d", {}, torch::rand({L, L}) > 0.7},
      {"CausalHint", {}, causal, true},
      {"BothMasks", kpm, causal},
      {"FullyMaskedSequence", dead, {}},
  };
  for (const Case& c : cases) check(c, torch::randn({L, N, 512}));
  check({"OneSequence", {}, {}}, torch::randn({1, 1, 512}));
  check({"Long", {}, {}}, torch::randn({1024, 1, 512}));
}

TEST_F(SequenceFirst, OtherCallsKeepPythonsSteps) {
  const Tensor x = torch::randn({16, 2, 512});
  const torch::NoGradGuard no_grad;
  const auto ops = ops_called([&] { attn->forward(x, x, x, {}, /*need_weights=*/true); });
  EXPECT_FALSE(called(ops, "mkldnn::_linear_pointwise"));
  const Tensor y = torch::randn({16, 2, 512});
  const mha::detail::AttentionCall cross{x, y, y, {}, {}, false, true, false};
  EXPECT_FALSE(mha::detail::plan_call(*attn, cross).sequence_first) << "not self-attention";
  const torch::AutoGradMode grad(true);
  const mha::detail::AttentionCall self{x, x, x, {}, {}, false, true, false};
  EXPECT_FALSE(mha::detail::plan_call(*attn, self).sequence_first) << "weights need grad";
}

}  // namespace
