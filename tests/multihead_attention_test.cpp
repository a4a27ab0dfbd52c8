// Unit tests of mha::MultiheadAttention: options, parameters, shapes, printing,
// cloning, Sequential/AnyModule defaults, dtype/device moves, warnings, CUDA.
// Numbers against Python are the parity suite's job (reference_parity_test.cpp).

#include <c10/util/Exception.h>
#include <mha/functional.h>
#include <mha/multihead_attention.h>

#include "silent_warnings.h"
#include "support.h"

namespace {

using mha::MultiheadAttention;
using mha::MultiheadAttentionOptions;
using mha::test::bitwise_equal;
using torch::Tensor;

struct MultiheadAttentionTest : mha::test::SeedingFixture {};

std::vector<std::string> keys_of(const MultiheadAttention& m) {
  return m->named_parameters().keys();
}

std::vector<int64_t> shape_of(const MultiheadAttention& m, const std::string& name) {
  return m->named_parameters()[name].sizes().vec();
}

TEST_F(MultiheadAttentionTest, OptionDefaultsArePythons) {
  const MultiheadAttentionOptions o(8, 2);
  EXPECT_EQ(o.embed_dim(), 8);
  EXPECT_EQ(o.num_heads(), 2);
  EXPECT_EQ(o.dropout(), 0.0);
  EXPECT_TRUE(o.bias());
  EXPECT_FALSE(o.add_bias_kv());
  EXPECT_FALSE(o.add_zero_attn());
  EXPECT_FALSE(o.kdim().has_value());
  EXPECT_FALSE(o.vdim().has_value());
  EXPECT_FALSE(o.batch_first());
}

// Expected names and shapes: Python's MultiheadAttention.__init__ (torch/nn/modules/activation.py).
TEST_F(MultiheadAttentionTest, PackedParametersNamesOrderShapes) {
  MultiheadAttention m(8, 2);
  EXPECT_EQ(keys_of(m), (std::vector<std::string>{"in_proj_weight", "in_proj_bias",
                                                  "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(shape_of(m, "in_proj_weight"), (std::vector<int64_t>{24, 8}));
  EXPECT_EQ(shape_of(m, "in_proj_bias"), (std::vector<int64_t>{24}));
  EXPECT_FALSE(m->q_proj_weight.defined());
}

TEST_F(MultiheadAttentionTest, SeparateParametersWithBiasKvNamesOrderShapes) {
  MultiheadAttention m(MultiheadAttentionOptions(8, 2).kdim(5).vdim(7).add_bias_kv(true));
  EXPECT_EQ(keys_of(m), (std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight",
                                                  "in_proj_bias", "bias_k", "bias_v",
                                                  "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(shape_of(m, "k_proj_weight"), (std::vector<int64_t>{8, 5}));
  EXPECT_EQ(shape_of(m, "v_proj_weight"), (std::vector<int64_t>{8, 7}));
  EXPECT_EQ(shape_of(m, "bias_k"), (std::vector<int64_t>{1, 1, 8}));
  EXPECT_FALSE(m->in_proj_weight.defined());
}

TEST_F(MultiheadAttentionTest, NoBiasHasNoBiasParameters) {
  MultiheadAttention m(MultiheadAttentionOptions(8, 2).bias(false));
  EXPECT_EQ(keys_of(m), (std::vector<std::string>{"in_proj_weight", "out_proj.weight"}));
}

TEST_F(MultiheadAttentionTest, KdimEqualToEmbedDimStaysPacked) {
  MultiheadAttention m(MultiheadAttentionOptions(8, 2).kdim(8).vdim(8));
  EXPECT_TRUE(m->in_proj_weight.defined());
}

TEST_F(MultiheadAttentionTest, InitialisationMatchesPythonsScheme) {
  MultiheadAttention m(MultiheadAttentionOptions(8, 2).add_bias_kv(true));
  EXPECT_TRUE(m->in_proj_bias.eq(0).all().item<bool>());
  EXPECT_TRUE(m->out_proj->bias.eq(0).all().item<bool>());
  const double bound = std::sqrt(6.0 / (8 + 24));  // xavier_uniform_ on (3E, E)
  EXPECT_LE(m->in_proj_weight.abs().max().item<double>(), bound);
  EXPECT_GT(m->bias_k.abs().sum().item<double>(), 0.0);  // xavier_normal_
}

TEST_F(MultiheadAttentionTest, PrettyPrintShowsNonDefaultOptions) {
  EXPECT_EQ(c10::str(*MultiheadAttention(MultiheadAttentionOptions(8, 2).batch_first(true))),
            "mha::MultiheadAttention(embed_dim=8, num_heads=2, batch_first=true)(\n"
            "  (out_proj): torch::nn::Linear(in_features=8, out_features=8, bias=true)\n)");
  std::ostringstream all;
  MultiheadAttention(MultiheadAttentionOptions(8, 2)
                         .dropout(0.1)
                         .bias(false)
                         .add_bias_kv(true)
                         .add_zero_attn(true)
                         .kdim(4)
                         .vdim(6))
      ->pretty_print(all);
  EXPECT_EQ(all.str(),
            "mha::MultiheadAttention(embed_dim=8, num_heads=2, dropout=0.1, bias=false, "
            "add_bias_kv=true, add_zero_attn=true, kdim=4, vdim=6)");
}

TEST_F(MultiheadAttentionTest, ShapesSequenceFirst) {
  MultiheadAttention m(MultiheadAttentionOptions(8, 2).kdim(5).vdim(7));
  const auto q = torch::randn({4, 3, 8}), k = torch::randn({6, 3, 5}), v = torch::randn({6, 3, 7});
  auto [out, w] = m(q, k, v);
  EXPECT_EQ(out.sizes(), torch::IntArrayRef({4, 3, 8}));
  EXPECT_EQ(w.sizes(), torch::IntArrayRef({3, 4, 6}));
  std::tie(out, w) = m(q, k, v, Tensor(), true, Tensor(), /*average_attn_weights=*/false);
  EXPECT_EQ(w.sizes(), torch::IntArrayRef({3, 2, 4, 6}));
  std::tie(out, w) = m(q, k, v, Tensor(), /*need_weights=*/false);
  EXPECT_EQ(out.sizes(), torch::IntArrayRef({4, 3, 8}));
  EXPECT_FALSE(w.defined());
}

TEST_F(MultiheadAttentionTest, ShapesBatchFirstAndUnbatched) {
  MultiheadAttention m(MultiheadAttentionOptions(8, 2).batch_first(true));
  const auto x = torch::randn({3, 4, 8});
  auto [out, w] = m(x, x, x);
  EXPECT_EQ(out.sizes(), torch::IntArrayRef({3, 4, 8}));
  EXPECT_EQ(w.sizes(), torch::IntArrayRef({3, 4, 4}));
  const auto u = torch::randn({4, 8});  // unbatched: batch_first is ignored
  std::tie(out, w) = m(u, u, u, Tensor(), true, Tensor(), false);
  EXPECT_EQ(out.sizes(), torch::IntArrayRef({4, 8}));
  EXPECT_EQ(w.sizes(), torch::IntArrayRef({2, 4, 4}));
}

TEST_F(MultiheadAttentionTest, BatchFirstEqualsTransposedSequenceFirst) {
  MultiheadAttention seq_first(8, 2);
  MultiheadAttention batch_first(MultiheadAttentionOptions(8, 2).batch_first(true));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : batch_first->named_parameters()) {
      p.value().copy_(seq_first->named_parameters()[p.key()]);
    }
  }
  const auto q = torch::randn({4, 3, 8}), k = torch::randn({6, 3, 8});
  const auto [a, wa] = seq_first(q, k, k);
  const auto [b, wb] = batch_first(q.transpose(0, 1), k.transpose(0, 1), k.transpose(0, 1));
  // Equal within float32 rounding: the transposed layout reaches other GEMM kernels.
  EXPECT_TRUE(mha::test::tensors_close(b.transpose(0, 1), a, 1e-4, 1e-5));
  EXPECT_TRUE(mha::test::tensors_close(wb, wa, 1e-4, 1e-5));
}

TEST_F(MultiheadAttentionTest, CloneIsDeepAndIndependent) {
  MultiheadAttention m(MultiheadAttentionOptions(8, 2).add_bias_kv(true));
  auto copy = std::dynamic_pointer_cast<mha::MultiheadAttentionImpl>(m->clone());
  ASSERT_TRUE(copy);
  const auto x = torch::randn({4, 2, 8});
  EXPECT_TRUE(bitwise_equal(std::get<0>(m(x, x, x)), std::get<0>(copy->forward(x, x, x))));
  {
    torch::NoGradGuard no_grad;
    copy->in_proj_weight.add_(1.0);
    copy->bias_k.zero_();
  }
  EXPECT_FALSE(m->in_proj_weight.is_same(copy->in_proj_weight));
  EXPECT_FALSE(bitwise_equal(m->in_proj_weight, copy->in_proj_weight));
  EXPECT_FALSE(bitwise_equal(m->bias_k, copy->bias_k));
  EXPECT_TRUE(copy->named_parameters()["in_proj_weight"].is_same(copy->in_proj_weight));
}

TEST_F(MultiheadAttentionTest, AnyModuleUsesForwardDefaults) {
  MultiheadAttention m(8, 2);
  torch::nn::AnyModule any(m);
  const auto x = torch::randn({4, 2, 8});
  const auto out = any.forward<std::tuple<Tensor, Tensor>>(x, x, x);
  const auto direct = m(x, x, x);
  EXPECT_TRUE(bitwise_equal(std::get<0>(out), std::get<0>(direct)));
  EXPECT_TRUE(bitwise_equal(std::get<1>(out), std::get<1>(direct)));
}

TEST_F(MultiheadAttentionTest, SequentialUsesForwardDefaults) {
  torch::nn::Sequential seq(MultiheadAttention(8, 2));
  const auto x = torch::randn({4, 2, 8});
  const auto [out, w] = seq->forward<std::tuple<Tensor, Tensor>>(x, x, x);
  EXPECT_EQ(out.sizes(), x.sizes());
  EXPECT_EQ(w.sizes(), torch::IntArrayRef({2, 4, 4}));
}

TEST_F(MultiheadAttentionTest, ToFloat64ConvertsParametersAndRuns) {
  MultiheadAttention m(8, 2);
  const auto x32 = torch::randn({4, 2, 8});
  const auto expected = std::get<0>(m(x32, x32, x32));
  m->to(torch::kFloat64);
  EXPECT_EQ(m->in_proj_weight.scalar_type(), torch::kFloat64);
  EXPECT_EQ(m->out_proj->weight.scalar_type(), torch::kFloat64);
  const auto x64 = x32.to(torch::kFloat64);
  const auto out = std::get<0>(m(x64, x64, x64));
  EXPECT_TRUE(mha::test::tensors_close(out.to(torch::kFloat32), expected, 1e-4, 1e-5));
}

TEST_F(MultiheadAttentionTest, FastPathSwitchKeepsResultsWithinTolerance) {
  MultiheadAttention m(MultiheadAttentionOptions(8, 2).batch_first(true));
  m->eval();
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({2, 5, 8});
  const auto kpm = torch::rand({2, 5}) < 0.3;
  kpm.select(1, 0).fill_(false);
  const auto fast = m(x, x, x, kpm);
  const auto slow = [&] {
    const mha::FastPathGuard slow_path(false);
    EXPECT_FALSE(mha::get_fastpath_enabled());
    return m(x, x, x, kpm);
  }();
  EXPECT_TRUE(mha::get_fastpath_enabled());  // the guard restored it
  EXPECT_TRUE(mha::test::tensors_close(std::get<0>(fast), std::get<0>(slow), 1e-4, 1e-5));
  EXPECT_TRUE(mha::test::tensors_close(std::get<1>(fast), std::get<1>(slow), 1e-4, 1e-5));
}

TEST_F(MultiheadAttentionTest, BoolMaskMasksUnlikeLibTorch) {
  // pytorch#80494: LibTorch adds a bool mask as +1. Ours masks: weight exactly 0.
  MultiheadAttention m(8, 2);
  const auto x = torch::randn({4, 1, 8});
  auto mask = torch::zeros({4, 4}, torch::kBool);
  mask.index_put_({torch::indexing::Slice(), 3}, true);
  const auto w = std::get<1>(m(x, x, x, Tensor(), true, mask));
  EXPECT_TRUE(w.select(2, 3).eq(0).all().item<bool>());
}

TEST_F(MultiheadAttentionTest, MismatchedMaskTypesWarnAsPython) {
  MultiheadAttention m(8, 2);
  const auto x = torch::randn({4, 2, 8});
  mha::support::CollectedWarnings collector;
  {
    c10::WarningUtils::WarningHandlerGuard guard(&collector);
    m(x, x, x, torch::zeros({2, 4}, torch::kBool), true, torch::zeros({4, 4}));
  }
  ASSERT_EQ(collector.messages.size(), 1u);
  EXPECT_EQ(collector.messages[0],
            "Support for mismatched key_padding_mask and attn_mask is deprecated. Use same type "
            "for both instead.");
}

TEST_F(MultiheadAttentionTest, CudaMatchesCpu) {
  MHA_SKIP_WITHOUT_CUDA();
  MultiheadAttention cpu(MultiheadAttentionOptions(64, 8).batch_first(true));
  auto gpu = std::dynamic_pointer_cast<mha::MultiheadAttentionImpl>(cpu->clone(torch::kCUDA));
  ASSERT_TRUE(gpu);
  const auto x = torch::randn({2, 16, 64});
  const auto kpm = torch::arange(16).ge(12).expand({2, 16}).contiguous();
  for (bool need_weights : {true, false}) {
    for (bool no_grad : {true, false}) {  // no grad + eval: the native fused path
      torch::AutoGradMode mode(!no_grad);
      cpu->eval();
      gpu->eval();
      const auto [a, wa] = cpu(x, x, x, kpm, need_weights);
      const auto xg = x.cuda();
      const auto [b, wb] = gpu->forward(xg, xg, xg, kpm.cuda(), need_weights);
      EXPECT_TRUE(mha::test::tensors_close(b.cpu(), a, 1e-4, 1e-5)) << need_weights << no_grad;
      if (need_weights) {
        EXPECT_TRUE(mha::test::tensors_close(wb.cpu(), wa, 1e-4, 1e-5));
      }
    }
  }
}

TEST_F(MultiheadAttentionTest, CudaBackwardMatchesCpu) {
  MHA_SKIP_WITHOUT_CUDA();
  MultiheadAttention cpu(MultiheadAttentionOptions(32, 4).kdim(16).vdim(24));
  auto gpu = std::dynamic_pointer_cast<mha::MultiheadAttentionImpl>(cpu->clone(torch::kCUDA));
  const auto q = torch::randn({5, 2, 32}), k = torch::randn({7, 2, 16}),
             v = torch::randn({7, 2, 24});
  std::get<0>(cpu(q, k, v, Tensor(), false)).sum().backward();
  std::get<0>(gpu->forward(q.cuda(), k.cuda(), v.cuda(), Tensor(), false)).sum().backward();
  for (const auto& p : cpu->named_parameters()) {
    EXPECT_TRUE(mha::test::tensors_close(gpu->named_parameters()[p.key()].grad().cpu(),
                                         p.value().grad(), 1e-4, 1e-5))
        << p.key();
  }
}

}  // namespace

namespace {

// The README's claims about which kernel a fast-path call takes: at L = 128
// with a padding mask, mha's fused kernel (SDPA), not Python's native op; for
// one sequence of L = 5 (too few rows for prepacked weights), Python's native op itself.
TEST_F(MultiheadAttentionTest, FastPathCallsTakeTheKernelTheReadmeNames) {
  MultiheadAttention attn(MultiheadAttentionOptions(512, 8).batch_first(true));
  attn->eval();
  torch::NoGradGuard no_grad;
  const std::string native = "aten::_native_multi_head_attention";
  const std::string sdpa = "aten::scaled_dot_product_attention";
  const auto x = torch::randn({4, 128, 512});  // (N, L, E)
  const auto pad = torch::zeros({4, 128}, torch::kBool);
  const auto fused = mha::test::ops_called([&] { attn(x, x, x, pad, /*need_weights=*/false); });
  EXPECT_TRUE(mha::test::called(fused, sdpa));
  EXPECT_FALSE(mha::test::called(fused, native));
  const auto y = torch::randn({1, 5, 512});
  const auto short_call = mha::test::ops_called(
      [&] { attn(y, y, y, pad.narrow(0, 0, 1).narrow(1, 0, 5), /*need_weights=*/false); });
  EXPECT_TRUE(mha::test::called(short_call, native));
}

// Sequence-first inference calls without weights (nn.MultiheadAttention's
// default layout) take the sequence-first kernel: SDPA on views of one
// projection, without the functional steps' split of it (`unflatten`), and a
// contiguous output, as Python's. Their bits are Python's: reference_parity_test.cpp's
// SeqFirstE512 cases. Weights, grad or Python's kernels keep the functional steps.
TEST_F(MultiheadAttentionTest, SequenceFirstInferenceCallsTakeTheSequenceFirstKernel) {
  MultiheadAttention attn(MultiheadAttentionOptions(512, 8));
  attn->eval();
  const auto x = torch::randn({128, 4, 512});  // (L, N, E)
  const auto pad = torch::zeros({4, 128}, torch::kBool);
  const std::string split = "aten::unflatten", sdpa = "aten::scaled_dot_product_attention";
  auto call = [&](bool need_weights) {
    Tensor out;
    const auto ops = mha::test::ops_called(
        [&] { out = std::get<0>(attn(x, x, x, pad, need_weights)); });  // (L, N, E)
    EXPECT_TRUE(out.is_contiguous()) << need_weights;
    return ops;
  };
  {
    torch::NoGradGuard no_grad;
    const auto fast = call(/*need_weights=*/false);
    EXPECT_TRUE(mha::test::called(fast, sdpa));
    EXPECT_FALSE(mha::test::called(fast, split));
    EXPECT_FALSE(mha::test::called(fast, "aten::_native_multi_head_attention"));
    EXPECT_TRUE(mha::test::called(call(/*need_weights=*/true), split));
    const mha::PythonKernelsGuard pythons;
    EXPECT_TRUE(mha::test::called(call(/*need_weights=*/false), split));
  }
  EXPECT_TRUE(mha::test::called(call(/*need_weights=*/false), split)) << "grad enabled";
}

// With Python's kernels the call that took mha's fused kernel above runs
// Python's native op, merged float masks and all (its bits: reference_parity_test.cpp).
TEST_F(MultiheadAttentionTest, PythonKernelsRunPythonsNativeOp) {
  MultiheadAttention attn(MultiheadAttentionOptions(64, 8).batch_first(true));
  attn->eval();
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({2, 128, 64});  // (N, L, E)
  const auto pad = torch::zeros({2, 128}, torch::kBool);
  const mha::PythonKernelsGuard pythons;
  for (const bool need_weights : {false, true}) {
    const auto ops = mha::test::ops_called([&] { attn(x, x, x, pad, need_weights); });
    EXPECT_TRUE(mha::test::called(ops, "aten::_native_multi_head_attention")) << need_weights;
    EXPECT_FALSE(mha::test::called(ops, "aten::scaled_dot_product_attention")) << need_weights;
  }
}

// docs/semantics.md: Python's native op ignores `is_causal`, mha's fused
// kernel trusts it (no key padding mask): a non-causal mask flagged causal
// gives the causal result there.
TEST_F(MultiheadAttentionTest, FusedKernelTrustsTheCausalHint) {
  MultiheadAttention attn(MultiheadAttentionOptions(16, 2).batch_first(true));
  attn->eval();
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({2, 128, 16});  // (N, L, E): L = 128 takes kFused
  const auto nothing_masked = torch::zeros({128, 128}, torch::kBool);
  const auto causal = torch::ones({128, 128}, torch::kBool).triu(1);
  const auto hinted = std::get<0>(attn->forward(x, x, x, {}, false, nothing_masked, true, true));
  const auto as_causal = std::get<0>(attn->forward(x, x, x, {}, false, causal));
  const auto as_given = std::get<0>(attn->forward(x, x, x, {}, false, nothing_masked));
  EXPECT_TRUE(mha::test::tensors_close(hinted, as_causal, 1e-4, 1e-5));
  EXPECT_FALSE(mha::test::tensors_close(hinted, as_given, 1e-4, 1e-5));
}

}  // namespace
