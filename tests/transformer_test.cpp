// Unit tests of mha's Transformer classes: deep copies, printing, causal-mask
// helpers, Python's nested-tensor warning, custom encoders, cached decoding.
// Numbers against Python are in transformer_parity_test.cpp and
// transformer_decoding_test.cpp; bad input is the Transformer table of
// bad_input_table_test.cpp.

#include <mha/prepack.h>
#include <mha/transformer.h>

#include <algorithm>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "silent_warnings.h"
#include "support.h"
#include "tolerances.h"
#include "transformer/layer_parts.h"

namespace {

using mha::test::called;
using mha::test::ops_called;
using torch::Tensor;

/// How many of `ops` are GEMMs on prepacked weights, in either layout
/// (`mha::prepack`'s default follows the CPU): mha's panel GEMM or oneDNN's.
int64_t packed_gemms(const std::vector<std::string>& ops) {
  return std::count(ops.begin(), ops.end(), "mha::panel_gemm") +
         std::count(ops.begin(), ops.end(), "mkldnn::_linear_pointwise");
}

mha::TransformerLayerOptions small(bool batch_first = false) {
  return mha::TransformerLayerOptions(8, 2).dim_feedforward(16).dropout(0.0).batch_first(
      batch_first);
}

TEST(TransformerClone, EncoderLayersAreDeepCopies) {
  mha::TransformerEncoderLayer layer(small());
  mha::TransformerEncoder encoder(mha::TransformerEncoderOptions(layer, 3));
  ASSERT_EQ(encoder->layers->size(), 3u);
  const auto first = encoder->layers[0]->named_parameters();
  const auto second = encoder->layers[1]->named_parameters();
  for (const auto& item : first) {
    const Tensor other = second[item.key()];
    EXPECT_TRUE(torch::equal(item.value(), other)) << item.key();
    EXPECT_NE(item.value().data_ptr(), other.data_ptr()) << item.key() << " shares storage";
    EXPECT_NE(item.value().data_ptr(), layer->named_parameters()[item.key()].data_ptr());
  }
  // A clone of the stack is deep too, nested-tensor decision included.
  auto copy = std::dynamic_pointer_cast<mha::TransformerEncoderImpl>(encoder->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->use_nested_tensor, encoder->use_nested_tensor);
  EXPECT_NE(copy->layers[0]->parameters()[0].data_ptr(),
            encoder->layers[0]->parameters()[0].data_ptr());
}

TEST(TransformerPrint, PrintsOptions) {
  std::ostringstream out;
  mha::TransformerDecoderLayer(small().activation(torch::kGELU).bias(false))->pretty_print(out);
  EXPECT_EQ(out.str(),
            "mha::TransformerDecoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0, "
            "activation=gelu, layer_norm_eps=1e-05, batch_first=false, norm_first=false, "
            "bias=false)");
  std::ostringstream norm;
  mha::LayerNorm(mha::LayerNormOptions({8}).bias(false))->pretty_print(norm);
  EXPECT_EQ(norm.str(), "mha::LayerNorm([8], eps=1e-05, elementwise_affine=true, bias=false)");
}

TEST(TransformerCausal, DetectsOnlyTheCausalMaskOfTheSize) {
  const Tensor causal = mha::generate_square_subsequent_mask(5);
  EXPECT_TRUE(mha::detect_is_causal_mask(causal));
  EXPECT_TRUE(mha::detect_is_causal_mask(causal, std::nullopt, 5));
  EXPECT_FALSE(mha::detect_is_causal_mask(causal, std::nullopt, 4));  // another size
  EXPECT_FALSE(mha::detect_is_causal_mask(causal, false));            // the hint wins
  EXPECT_TRUE(mha::detect_is_causal_mask(Tensor(), true));
  EXPECT_FALSE(mha::detect_is_causal_mask(Tensor()));
  Tensor other = causal.clone();
  other[0][1] = 0.0;
  EXPECT_FALSE(mha::detect_is_causal_mask(other));
  EXPECT_TRUE(mha::detect_is_causal_mask(causal.isinf()));  // a bool causal mask too
}

TEST(TransformerNested, WarnsAsPythonWhenTheLayerCannotUseNestedTensors) {
  // Odd heads: a reason no other test of this program warns, so its first
  // stack is the process's first. Each reason is warned once per process.
  const auto odd_heads = mha::TransformerLayerOptions(9, 3).dim_feedforward(16).batch_first(true);
  mha::support::CollectedWarnings warnings;
  c10::WarningUtils::WarningHandlerGuard guard(&warnings);
  for (int i = 0; i < 3; ++i) {  // a server building one stack per worker
    mha::TransformerEncoder encoder(
        mha::TransformerEncoderOptions(mha::TransformerEncoderLayer(odd_heads), 1));
    EXPECT_FALSE(encoder->use_nested_tensor);
  }
  ASSERT_EQ(warnings.messages.size(), 1u);
  EXPECT_NE(warnings.messages[0].find("enable_nested_tensor is True, but "
                                      "self.use_nested_tensor is False because "
                                      "encoder_layer.self_attn.num_heads is odd"),
            std::string::npos);
  mha::TransformerEncoder fast(
      mha::TransformerEncoderOptions(mha::TransformerEncoderLayer(small(true)), 1));
  EXPECT_TRUE(fast->use_nested_tensor);
  EXPECT_EQ(warnings.messages.size(), 1u);
}

TEST(TransformerFastPath, EncoderLayerCallsPythonsFusedOpWherePythonDoes) {
  torch::NoGradGuard no_grad;
  const Tensor src = torch::randn({2, 5, 8});  // (N, L, E)
  const Tensor kpm = torch::zeros({2, 5}, torch::kBool);
  const std::string op = "aten::_transformer_encoder_layer_fwd";
  mha::TransformerEncoderLayer fast(small(true));
  fast->eval();
  EXPECT_TRUE(called(ops_called([&] { fast(src, Tensor(), kpm); }), op));
  mha::TransformerEncoderLayer callable(
      small(true).activation([](const Tensor& x) { return at::relu(x); }));
  callable->eval();
  EXPECT_FALSE(called(ops_called([&] { callable(src); }), op));  // Python's callable
  fast->train();
  EXPECT_FALSE(called(ops_called([&] { fast(src); }), op));
  fast->eval();
  const mha::FastPathGuard slow_path(false);
  EXPECT_FALSE(called(ops_called([&] { fast(src); }), op));
}

// Where Python's op would build (N, H, L, L) scores, or cannot take the
// weights (prepacked by mha::prepack), the layer runs its own steps: mha's
// fused attention kernel (prepacked: the prefill attention at every length),
// and the GEMMs on the packed weights (within float32 rounding); with Python's
// kernels, Python's op.
TEST(TransformerFastPath, EncoderLayerRunsItsStepsWhereTheyAreFaster) {
  torch::NoGradGuard no_grad;
  const std::string op = "aten::_transformer_encoder_layer_fwd";
  mha::TransformerEncoderLayer layer(
      mha::TransformerEncoderLayerOptions(512, 8).dim_feedforward(2048).batch_first(true));
  layer->eval();
  const Tensor rows16 = torch::randn({1, 16, 512});  // (N, L, E): a short sequence
  EXPECT_TRUE(called(ops_called([&] { layer(rows16); }), op)) << "float weights: Python's op";
  mha::prepack(layer);
  for (const Tensor& src : {rows16, torch::randn({1, 5, 512})}) {
    const auto ops = ops_called([&] { layer(src); });
    EXPECT_FALSE(called(ops, op));
    EXPECT_TRUE(called(ops, "mha::prefill_attention"));
    EXPECT_GT(packed_gemms(ops), 0);
  }
  mha::TransformerEncoderLayer narrow(small(true));
  narrow->eval();
  const Tensor long_src = torch::randn({2, 128, 8});  // a long sequence: the fused kernel
  EXPECT_FALSE(called(ops_called([&] { narrow(long_src); }), op));
  const mha::PythonKernelsGuard pythons;
  EXPECT_TRUE(called(ops_called([&] { layer(rows16); }), op));
  EXPECT_TRUE(called(ops_called([&] { narrow(long_src); }), op));
}

// Outside autograd the feed-forward's GELU runs in place on linear1's fresh
// output (no second buffer); under autograd out of place, for backward. The
// same kernel: the same bits on the same input. (The two calls' outputs agree
// within float32 rounding only: LibTorch's matmul picks its kernel by
// requires_grad.) A decoder layer of the size people serve.
TEST(TransformerFeedForward, ActivationRunsInPlaceOutsideAutogradWithTheSameBits) {
  mha::TransformerDecoderLayer layer(mha::TransformerDecoderLayerOptions(512, 8)
                                         .dim_feedforward(2048)
                                         .activation(torch::kGELU)
                                         .batch_first(true));
  layer->eval();
  const Tensor tgt = torch::randn({2, 16, 512}), memory = torch::randn({2, 20, 512});  // (N, L, E)
  Tensor with_grad;
  const auto grad_ops = ops_called([&] { with_grad = layer(tgt, memory); });
  EXPECT_TRUE(called(grad_ops, "aten::gelu"));
  EXPECT_FALSE(called(grad_ops, "aten::gelu_"));
  with_grad.sum().backward();
  EXPECT_TRUE(layer->linear1->weight.grad().defined());
  Tensor inference;
  const auto ops = ops_called([&] {
    const c10::InferenceMode guard;
    inference = layer(tgt, memory);
  });
  EXPECT_TRUE(called(ops, "aten::gelu_"));
  EXPECT_FALSE(called(ops, "aten::gelu"));
  const auto tol = mha::support::parity_tolerance(torch::kFloat);
  EXPECT_TRUE(torch::allclose(inference, with_grad.detach(), tol.rtol, tol.atol));
  const c10::InferenceMode guard;
  const Tensor hidden = layer->linear1(tgt);  // (N, L, 2048)
  Tensor in_place = hidden.clone();
  at::gelu_(in_place);
  EXPECT_TRUE(mha::test::bitwise_equal(in_place, at::gelu(hidden)));
}

TEST(TransformerResidual, AddsRunInPlaceOutsideAutogradWithTheSameBits) {
  // A post-norm decoder layer at E = 512: its three residual adds are
  // aten::add under autograd (backward works) and aten::add_ into the
  // block's output in InferenceMode; the sums are the same bits (float
  // addition commutes), and the layer's input is left as it was.
  mha::TransformerDecoderLayer layer(
      mha::TransformerDecoderLayerOptions(512, 8).dim_feedforward(2048).batch_first(true));
  layer->eval();
  const Tensor tgt = torch::randn({2, 16, 512}), memory = torch::randn({2, 20, 512});  // (N, L, E)
  const Tensor before = tgt.clone();
  // the residual: the op right after a block's closing dropout
  const auto residuals = [](const std::vector<std::string>& ops, const std::string& op) {
    int64_t n = 0;
    for (size_t i = 1; i < ops.size(); ++i) n += ops[i - 1] == "aten::dropout" && ops[i] == op;
    return n;
  };
  Tensor with_grad;
  const auto grad_ops = ops_called([&] { with_grad = layer(tgt, memory); });
  with_grad.sum().backward();
  EXPECT_TRUE(layer->linear2->weight.grad().defined());
  Tensor inference;
  const auto ops = ops_called([&] {
    const c10::InferenceMode guard;
    inference = layer(tgt, memory);
  });
  EXPECT_EQ(residuals(grad_ops, "aten::add"), 3);
  EXPECT_EQ(residuals(grad_ops, "aten::add_"), 0);
  EXPECT_EQ(residuals(ops, "aten::add_"), 3);
  EXPECT_EQ(residuals(ops, "aten::add"), 0);
  const auto tol = mha::support::parity_tolerance(torch::kFloat);
  EXPECT_TRUE(torch::allclose(inference, with_grad.detach(), tol.rtol, tol.atol));
  EXPECT_TRUE(mha::test::bitwise_equal(tgt, before));
  const c10::InferenceMode guard;
  const Tensor block = layer->linear2(layer->linear1(tgt));  // a block's output, (N, L, E)
  EXPECT_TRUE(mha::test::bitwise_equal(mha::detail::residual_add(tgt, block.clone()), tgt + block));
}

TEST(TransformerFastPath, EncoderConvertsToNestedTensorsWherePythonDoes) {
  torch::NoGradGuard no_grad;
  mha::TransformerEncoder encoder(
      mha::TransformerEncoderOptions(mha::TransformerEncoderLayer(small(true)), 2));
  encoder->eval();
  const Tensor src = torch::randn({2, 5, 8});
  Tensor kpm = torch::zeros({2, 5}, torch::kBool);
  kpm[1][4] = true;  // left aligned: padding at the end
  const std::string op = "aten::_nested_tensor_from_mask";
  EXPECT_TRUE(called(ops_called([&] { encoder(src, Tensor(), kpm); }), op));
  EXPECT_FALSE(called(ops_called([&] { encoder(src, Tensor(), kpm.flip(-1)); }), op));
  EXPECT_FALSE(called(ops_called([&] { encoder(src); }), op));
}

TEST(TransformerCustom, CustomEncoderIsUsedAndReinitialised) {
  mha::TransformerEncoder custom(
      mha::TransformerEncoderOptions(mha::TransformerEncoderLayer(small()), 1));
  mha::Transformer model(mha::TransformerOptions(8, 2, 1, 1)
                             .dim_feedforward(16)
                             .custom_encoder(torch::nn::AnyModule(custom)));
  const auto names = model->named_parameters().keys();
  EXPECT_EQ(names.front(), "encoder.layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(std::count_if(names.begin(), names.end(),
                          [](const std::string& n) { return n.rfind("encoder.norm", 0) == 0; }),
            0);
  const Tensor out = model(torch::randn({5, 2, 8}), torch::randn({4, 2, 8}));
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{4, 2, 8}));
}

/// A 2-layer decoder with a final norm, in eval mode.
mha::TransformerDecoder cached_decoder(const mha::TransformerLayerOptions& options) {
  mha::TransformerDecoder decoder(
      mha::TransformerDecoderOptions(mha::TransformerDecoderLayer(options), 2)
          .norm(torch::nn::AnyModule(mha::LayerNorm(mha::LayerNormOptions({options.d_model()})))));
  decoder->eval();
  return decoder;
}

TEST(TransformerCached, DecoderStepsMatchForwardOnThePrefix) {
  const auto tol = mha::support::parity_tolerance(torch::kFloat32);
  struct Variant {
    const char* name;
    mha::TransformerLayerOptions options;
    bool batched;
  };
  for (const auto& v : {Variant{"post-norm relu", small(), true},
                        Variant{"pre-norm gelu batch-first",
                                small(true).norm_first(true).activation(torch::kGELU), true},
                        Variant{"unbatched", small(), false}}) {
    SCOPED_TRACE(v.name);
    mha::TransformerDecoder decoder = cached_decoder(v.options);
    const bool bf = v.options.batch_first() && v.batched;
    const int64_t seq_dim = bf ? 1 : 0, n = 3, t = 6;
    auto shaped = [&](int64_t len) {  // (len, N, E), (N, len, E) or (len, E)
      if (!v.batched) return torch::randn({len, 8});
      return bf ? torch::randn({n, len, 8}) : torch::randn({len, n, 8});
    };
    const Tensor tgt = shaped(t), memory = shaped(5);
    // Right padding: entry 1's last two positions (a batched mask only).
    const Tensor kpm = v.batched ? torch::zeros({n, t}, torch::kBool)
                                       .index_put_({1, torch::indexing::Slice(t - 2)}, true)
                                 : Tensor();
    const Tensor full =
        decoder->forward(tgt, memory, mha::generate_square_subsequent_mask(t), {}, kpm);
    auto cache = decoder->make_cache();
    const std::vector<int64_t> chunks{2, 1, 1, 1, 1};  // a prompt, then single steps
    int64_t start = 0;
    for (const int64_t len : chunks) {
      const Tensor mask = kpm.defined() ? kpm.narrow(1, 0, start + len) : kpm;
      const Tensor out = decoder->forward_cached(tgt.narrow(seq_dim, start, len),
                                                 start == 0 ? memory : Tensor(), cache, mask);
      EXPECT_FALSE(out.requires_grad());
      EXPECT_TRUE(
          mha::test::tensors_close(out, full.narrow(seq_dim, start, len), tol.rtol, tol.atol))
          << "positions from " << start;
      start += len;
    }
    EXPECT_EQ(cache.length(), t);
  }
}

TEST(TransformerCached, CacheReportsItsSizesAndClears) {
  mha::TransformerDecoder decoder = cached_decoder(small());
  auto cache = decoder->make_cache(/*max_len=*/4);
  EXPECT_EQ(cache.num_layers(), 2);
  EXPECT_EQ(cache.length() + cache.batch_size() + cache.memory_bytes(), 0);
  const Tensor memory = torch::randn({5, 3, 8}), tgt = torch::randn({2, 3, 8});
  const Tensor first = decoder->forward_cached(tgt, memory, cache);
  EXPECT_EQ(cache.length(), 2);
  EXPECT_EQ(cache.memory_length(), 5);
  EXPECT_EQ(cache.batch_size(), 3);
  // Per layer: keys and values of 4 (capacity) + 5 (memory) positions, N=3, E=8, float.
  EXPECT_EQ(cache.memory_bytes(), 2 * 2 * (4 + 5) * 3 * 8 * 4);
  cache.clear();
  EXPECT_EQ(cache.length() + cache.memory_length(), 0);
  EXPECT_TRUE(mha::test::bitwise_equal(decoder->forward_cached(tgt, memory, cache), first));
}

TEST(TransformerCached, TransformerEncodesOnceAndDecodesStepByStep) {
  mha::Transformer model(mha::TransformerOptions(8, 2, 1, 2).dim_feedforward(16));
  model->eval();
  const auto tol = mha::support::parity_tolerance(torch::kFloat32);
  const Tensor src = torch::randn({5, 2, 8}), tgt = torch::randn({4, 2, 8});
  const Tensor full = model->forward(src, tgt, {}, mha::generate_square_subsequent_mask(4));
  const mha::TransformerImpl& frozen = *model;  // encoding and a cache change no weight
  const Tensor memory = frozen.encode(src);
  auto cache = frozen.make_decoder_cache();
  for (int64_t i = 0; i < 4; ++i) {
    const Tensor out = model->decode_cached(tgt.narrow(0, i, 1), memory, cache);
    EXPECT_TRUE(mha::test::tensors_close(out, full.narrow(0, i, 1), tol.rtol, tol.atol)) << i;
  }
  mha::Transformer custom(mha::TransformerOptions(8, 2, 1, 1)
                              .custom_decoder(torch::nn::AnyModule(torch::nn::Linear(8, 8))));
  MHA_ASSERT_THROWS_WITH(custom->make_decoder_cache(),
                         "decode_cached needs a mha::TransformerDecoder as the decoder");
}

/// An encoder of serving size (E = 512, 8 heads, 2048 wide, 2 layers, final
/// norm), eval, as built or prepacked (oneDNN's GEMM over all rows).
mha::TransformerEncoder serving_encoder(bool norm_first, bool prepacked) {
  torch::manual_seed(0);
  const auto layer = mha::TransformerEncoderLayer(
      mha::TransformerEncoderLayerOptions(512, 8).dim_feedforward(2048).dropout(0.0).norm_first(
          norm_first));
  mha::TransformerEncoder encoder(
      mha::TransformerEncoderOptions(layer, 2).enable_nested_tensor(false).norm(
          torch::nn::AnyModule(mha::LayerNorm(std::vector<int64_t>{512}))));
  encoder->eval();
  if (prepacked) mha::prepack(encoder);
  return encoder;
}

/// forward_packed on sequences of 1-97 positions (and an empty one) packed as
/// rows: each sequence's rows within float32 rounding of forward on it alone
/// (a batch of one), post- and pre-norm, float and prepacked weights.
TEST(TransformerPacked, EachSequenceMatchesForwardOnItAlone) {
  const auto tol = mha::support::parity_tolerance(torch::kFloat32);
  const std::vector<int64_t> lengths{17, 1, 0, 97, 40};
  std::vector<int64_t> offsets{0};
  for (const int64_t length : lengths) offsets.push_back(offsets.back() + length);
  torch::NoGradGuard no_grad;  // forward on prepacked weights
  for (const bool norm_first : {false, true}) {
    for (const bool prepacked : {false, true}) {
      SCOPED_TRACE(std::string(norm_first ? "pre-norm" : "post-norm") +
                   (prepacked ? ", prepacked" : ""));
      mha::TransformerEncoder encoder = serving_encoder(norm_first, prepacked);
      const Tensor rows = torch::randn({offsets.back(), 512});  // (T, E)
      const Tensor packed = encoder->forward_packed(rows, torch::tensor(offsets));
      ASSERT_EQ(packed.sizes(), rows.sizes());
      EXPECT_FALSE(packed.requires_grad());
      for (size_t i = 0; i < lengths.size(); ++i) {
        if (lengths[i] == 0) continue;
        const Tensor alone =  // (L, 1, E) -> (L, E)
            encoder->forward(rows.narrow(0, offsets[i], lengths[i]).unsqueeze(1)).squeeze(1);
        EXPECT_TRUE(mha::test::tensors_close(packed.narrow(0, offsets[i], lengths[i]), alone,
                                             tol.rtol, tol.atol))
            << "sequence " << i;
      }
    }
  }
}

TEST(TransformerPacked, OneLayerMatchesItsForwardAndRunsOneGemmPerProjection) {
  torch::NoGradGuard no_grad;  // forward on prepacked weights
  mha::TransformerEncoder encoder = serving_encoder(false, true);
  auto& layer = *encoder->layers->ptr<mha::TransformerEncoderLayerImpl>(0);
  const Tensor rows = torch::randn({30, 512});
  const Tensor offsets = torch::tensor({0, 12, 30}, torch::kInt);  // int32 offsets too
  Tensor packed;
  const auto ops = mha::test::ops_called([&] { packed = layer.forward_packed(rows, offsets); });
  // in_proj, out_proj, linear1, linear2: one call each over all 30 rows
  EXPECT_EQ(packed_gemms(ops), 4);
  const auto tol = mha::support::parity_tolerance(torch::kFloat32);
  EXPECT_TRUE(mha::test::tensors_close(
      packed.narrow(0, 12, 18), layer.forward(rows.narrow(0, 12, 18).unsqueeze(1)).squeeze(1),
      tol.rtol, tol.atol));
}

TEST(TransformerPacked, BadInputThrowsWithTheFix) {
  mha::TransformerEncoder encoder = serving_encoder(false, false);
  const Tensor rows = torch::randn({6, 512});
  MHA_ASSERT_THROWS_WITH(encoder->forward_packed(rows.unsqueeze(0), torch::tensor({0, 6})),
                         "expected src of shape (rows, 512)");
  MHA_ASSERT_THROWS_WITH(encoder->forward_packed(torch::randn({6, 16}), torch::tensor({0, 6})),
                         "but got torch.Size([6, 16])");
  MHA_ASSERT_THROWS_WITH(encoder->forward_packed(rows, torch::tensor({{0, 6}})),
                         "expected cu_seqlens of shape (num_seqs + 1)");
  MHA_ASSERT_THROWS_WITH(
      encoder->forward_packed(rows, torch::tensor({0, 5})),
      "expected cu_seqlens to start at 0 and end at 6 (the rows), but got 0 and 5");
  MHA_ASSERT_THROWS_WITH(encoder->forward_packed(rows, torch::tensor({0, 4, 2, 6})),
                         "expected non-decreasing cu_seqlens");
  MHA_ASSERT_THROWS_WITH(encoder->forward_packed(rows, torch::tensor({0.0, 6.0})),
                         "of dtype int32 or int64");
  encoder->train();
  MHA_ASSERT_THROWS_WITH(encoder->forward_packed(rows, torch::tensor({0, 6})),
                         "forward_packed is for inference, but the module is in training mode");
}

}  // namespace
