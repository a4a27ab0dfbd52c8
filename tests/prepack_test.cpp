// mha::prepack (include/mha/prepack.h): weights held once, in oneDNN's packed
// form, by the module that owns them; every way a LibTorch user edits,
// saves, loads, clones or converts a weight either seen, impossible or a
// clear error; results within float32 rounding of the float module, and
// Python's bits with Python's kernels on. Sizes that serve: E = 512.

#include <gtest/gtest.h>
#include <mha/mha.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "linear/int8_linear.h"
#include "linear/packed_linear.h"
#include "support.h"
#include "tolerances.h"

namespace {

using mha::test::bitwise_equal;
using mha::test::called;
using mha::test::ops_called;
using torch::Tensor;

constexpr const char* kPackOp = "mkldnn::_reorder_linear_weight";
constexpr const char* kPackedGemmOp = "mkldnn::_linear_pointwise";
/// oneDNN's layout, whatever this CPU's default (PrepackOptions::panels).
const mha::PrepackOptions kOneDnn = mha::PrepackOptions().panels(false);

/// An encoder layer of the size people serve (d_model 512, 8 heads, FFN 2048).
mha::TransformerEncoderLayer serving_layer() {
  mha::TransformerEncoderLayer layer(
      mha::TransformerLayerOptions(512, 8).dim_feedforward(2048).batch_first(true));
  layer->eval();
  return layer;
}

/// A copy of `layer` with the same weights (a float module to compare with).
mha::TransformerEncoderLayer copy_of(const mha::TransformerEncoderLayer& layer) {
  return mha::TransformerEncoderLayer(
      std::dynamic_pointer_cast<mha::TransformerEncoderLayerImpl>(layer->clone()));
}

/// A copy of a decoder layer with the same weights.
mha::TransformerDecoderLayer copy_of(const mha::TransformerDecoderLayer& layer) {
  return mha::TransformerDecoderLayer(
      std::dynamic_pointer_cast<mha::TransformerDecoderLayerImpl>(layer->clone()));
}

Tensor run(mha::TransformerEncoderLayer& layer, const Tensor& src) {
  const c10::InferenceMode inference;
  return layer(src);
}

void expect_close(const Tensor& out, const Tensor& expected) {
  const auto tol = mha::support::parity_tolerance(torch::kFloat);
  EXPECT_TRUE(torch::allclose(out, expected, tol.rtol, tol.atol))
      << "max |prepacked - float| = " << (out - expected).abs().max().item<double>();
}

class PrepackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!mha::detail::PackedLinearOps::onednn().available()) {
      GTEST_SKIP() << "this LibTorch has no " << kPackOp << " / " << kPackedGemmOp;
    }
    torch::manual_seed(0);
  }
  Tensor src = torch::randn({1, 32, 512});  // (N, L, E)
};

TEST_F(PrepackTest, HoldsEachWeightOnceAndGivesItBackBitForBit) {
  auto layer = serving_layer();
  const auto before = mha::state_dict(*layer);
  mha::prepack(layer, kOneDnn);
  EXPECT_TRUE(mha::is_prepacked(*layer));
  EXPECT_FALSE(mha::is_quantized(*layer));
  for (const Tensor* weight :
       {&layer->self_attn->in_proj_weight, &layer->self_attn->out_proj->weight,
        &layer->linear1->weight, &layer->linear2->weight}) {
    EXPECT_EQ(weight->numel(), 0) << "the float copy is gone";
    EXPECT_FALSE(weight->requires_grad());
  }
  int64_t float_elements = 0;
  for (const auto& p : layer->parameters()) float_elements += p.numel();
  EXPECT_EQ(float_elements, 3 * 512 + 512 + 2048 + 512 + 4 * 512) << "biases and norms only";
  const auto after = mha::state_dict(*layer);
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(after[i].first, before[i].first);
    EXPECT_TRUE(bitwise_equal(after[i].second, before[i].second)) << before[i].first;
  }
}

TEST_F(PrepackTest, AgreesWithTheFloatModuleAndIsPythonsBitsWithPythonsKernels) {
  auto layer = serving_layer();
  auto reference = copy_of(layer);
  mha::prepack(layer, kOneDnn);
  for (const Tensor& x : {src, torch::randn({4, 16, 512}), torch::randn({1, 1, 512})}) {
    std::vector<std::string> ops;
    Tensor out;
    ops = ops_called([&] { out = run(layer, x); });
    EXPECT_TRUE(called(ops, kPackedGemmOp));
    EXPECT_FALSE(called(ops, kPackOp)) << "packed once, by prepack";
    expect_close(out, run(reference, x));
    const mha::PythonKernelsGuard python_kernels(true);
    EXPECT_TRUE(bitwise_equal(run(layer, x), run(reference, x)));
  }
}

// Sequence-first attention (nn.MultiheadAttention's default layout) with
// non-zero biases: inference calls without weights take the sequence-first
// kernel on the packed GEMMs, within float32 rounding of the float module;
// with Python's kernels, Python's bits (the float module's: reference_parity_test.cpp).
TEST_F(PrepackTest, SequenceFirstCallsAgreeWithTheFloatModuleAndArePythonsBitsWithPythonsKernels) {
  mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(512, 8));
  {
    const torch::NoGradGuard no_grad;
    attn->in_proj_bias.normal_(0.0, 0.05);
    attn->out_proj->bias.normal_(0.0, 0.05);
  }
  attn->eval();
  auto reference = mha::MultiheadAttention(
      std::dynamic_pointer_cast<mha::MultiheadAttentionImpl>(attn->clone()));
  mha::prepack(attn, kOneDnn);
  const auto run = [](mha::MultiheadAttention& m, const Tensor& x, const Tensor& kpm,
                      const Tensor& mask) {
    const c10::InferenceMode inference;
    return std::get<0>(m->forward(x, x, x, kpm, /*need_weights=*/false, mask,
                                  /*average_attn_weights=*/true, /*is_causal=*/mask.defined()));
  };
  for (const auto& [batch, length] : {std::pair<int64_t, int64_t>{1, 16}, {8, 128}}) {
    const Tensor x = torch::randn({length, batch, 512});  // (L, N, E)
    Tensor kpm = torch::zeros({batch, length}, torch::kBool);
    kpm.select(0, 0).narrow(0, length / 2, length / 2).fill_(true);
    const Tensor causal = torch::ones({length, length}, torch::kBool).triu(1);
    for (const auto& [pad, mask] :
         {std::pair<Tensor, Tensor>{}, {kpm, Tensor()}, {Tensor(), causal}, {kpm, causal}}) {
      Tensor out;
      const auto ops = ops_called([&] { out = run(attn, x, pad, mask); });
      EXPECT_TRUE(called(ops, kPackedGemmOp));
      EXPECT_FALSE(called(ops, "aten::unflatten")) << "the sequence-first kernel";
      EXPECT_TRUE(out.is_contiguous());
      expect_close(out, run(reference, x, pad, mask));
      const mha::PythonKernelsGuard python_kernels(true);
      EXPECT_TRUE(bitwise_equal(run(attn, x, pad, mask), run(reference, x, pad, mask)));
    }
  }
}

TEST_F(PrepackTest, AnEditThroughDataOfAFloatWeightIsSeen) {
  // A float module holds no packed copy: an edit through .data() (no version
  // bump) is what the next call computes with.
  auto layer = serving_layer();
  run(layer, src);
  layer->linear2->weight.data().zero_();
  const Tensor out = run(layer, src);
  const mha::PythonKernelsGuard python_kernels(true);
  expect_close(out, run(layer, src));
}

TEST_F(PrepackTest, EditsOfAPrepackedWeightAreImpossibleOrSeen) {
  auto layer = serving_layer();
  mha::prepack(layer, kOneDnn);
  const Tensor out = run(layer, src);
  layer->linear2->weight.data().zero_();  // an empty tensor: nothing to edit
  EXPECT_TRUE(bitwise_equal(run(layer, src), out));
  EXPECT_ANY_THROW(layer->linear2->weight.copy_(torch::zeros({512, 2048})));
  // A weight given back with set_data is computed with as it is, in float.
  layer->linear2->weight.set_data(torch::zeros({512, 2048}));
  auto reference = serving_layer();
  std::map<std::string, Tensor> weights;
  for (const auto& [name, value] : mha::state_dict(*layer)) weights.emplace(name, value);
  mha::load_state_dict(*reference, weights);
  EXPECT_TRUE(torch::equal(reference->linear2->weight, torch::zeros({512, 2048})));
  expect_close(run(layer, src), run(reference, src));
}

TEST_F(PrepackTest, InferenceModeWeightsArePrepackedToo) {
  Tensor out, expected;
  {
    const c10::InferenceMode inference;
    auto layer = serving_layer();  // built under InferenceMode: inference tensors
    auto reference = copy_of(layer);
    mha::prepack(layer, kOneDnn);
    const auto ops = ops_called([&] { out = layer(src); });
    EXPECT_TRUE(called(ops, kPackedGemmOp));
    expected = reference(src);
  }
  expect_close(out, expected);
}

TEST_F(PrepackTest, TorchSaveAndLoadKeepThePackedWeightsAndRefuseMismatches) {
  auto layer = serving_layer();
  mha::prepack(layer, kOneDnn);
  std::stringstream bytes;
  torch::save(layer, bytes);
  auto other = serving_layer();  // other weights
  mha::prepack(other, kOneDnn);
  torch::load(other, bytes);
  EXPECT_TRUE(bitwise_equal(run(other, src), run(layer, src)));

  auto plain = serving_layer();
  const Tensor plain_out = run(plain, src);
  bytes.seekg(0);
  MHA_ASSERT_THROWS_WITH(torch::load(plain, bytes), "as prepacked (mha::prepack) weights");
  EXPECT_TRUE(bitwise_equal(run(plain, src), plain_out)) << "a failed load changes nothing";
  std::stringstream float_bytes;
  torch::save(plain, float_bytes);
  MHA_ASSERT_THROWS_WITH(torch::load(other, float_bytes), "the archive holds float weights");
  auto quantized = serving_layer();
  mha::quantize_dynamic(quantized);
  bytes.seekg(0);
  MHA_ASSERT_THROWS_WITH(torch::load(quantized, bytes), "but this module's are int8");
}

TEST_F(PrepackTest, LoadStateDictRepacks) {
  auto layer = serving_layer();
  mha::prepack(layer, kOneDnn);
  auto source = serving_layer();  // other weights
  const auto path = std::filesystem::temp_directory_path() / "mha_prepack_reload.safetensors";
  mha::save_state_dict(*source, path.string());
  mha::load_state_dict(*layer, path.string());
  std::filesystem::remove(path);
  expect_close(run(layer, src), run(source, src));
  const mha::PythonKernelsGuard python_kernels(true);
  EXPECT_TRUE(bitwise_equal(run(layer, src), run(source, src)));
}

TEST_F(PrepackTest, CloneIsPrepackedAndEqual) {
  auto layer = serving_layer();
  mha::prepack(layer, kOneDnn);
  auto copy = copy_of(layer);
  EXPECT_TRUE(mha::is_prepacked(*copy));
  EXPECT_TRUE(bitwise_equal(run(copy, src), run(layer, src)));
}

TEST_F(PrepackTest, ToAnotherDtypeThrowsAndTheWeightIsFreedWithTheModule) {
  auto layer = serving_layer();
  mha::prepack(layer, kOneDnn);
  MHA_ASSERT_THROWS_WITH(layer->to(torch::kDouble), "holds prepacked (mha::prepack) weights");
  MHA_ASSERT_THROWS_WITH(layer->to(torch::kDouble), "call mha::unpack(module) first");
  std::weak_ptr<torch::nn::Module> packed = layer->linear1->named_children()["weight_packed"];
  ASSERT_FALSE(packed.expired());
  layer = mha::TransformerEncoderLayer(nullptr);
  EXPECT_TRUE(packed.expired()) << "no cache outlives the module";
}

/// A whole seq2seq Transformer of the size people serve (2 + 2 layers, the
/// stacks' prototype layers and the decoder's two-block cross-attention included).
mha::Transformer serving_transformer() {
  mha::Transformer model(mha::TransformerOptions(512, 8, 2, 2).batch_first(true));
  model->eval();
  return model;
}

Tensor run(mha::Transformer& model, const Tensor& src, const Tensor& tgt) {
  const c10::InferenceMode inference;
  return model(src, tgt);
}

TEST_F(PrepackTest, UnpackGivesTheFloatModuleBackBitForBit) {
  auto model = serving_transformer();
  auto plain = mha::Transformer(std::dynamic_pointer_cast<mha::TransformerImpl>(model->clone()));
  const Tensor tgt = torch::randn({1, 8, 512});
  mha::prepack(model, kOneDnn);
  mha::unpack(model);
  EXPECT_FALSE(mha::is_prepacked(*model));
  auto encoder = model->encoder.get<mha::TransformerEncoder>();
  auto decoder = model->decoder.get<mha::TransformerDecoder>();
  EXPECT_FALSE(mha::is_prepacked(*encoder->options.encoder_layer()));
  EXPECT_FALSE(mha::is_prepacked(*decoder->options.decoder_layer()));
  const auto expected = plain->named_parameters();
  for (const auto& p : model->named_parameters()) {
    EXPECT_TRUE(bitwise_equal(p.value(), expected[p.key()])) << p.key();
    EXPECT_EQ(p.value().requires_grad(), expected[p.key()].requires_grad()) << p.key();
  }
  EXPECT_TRUE(bitwise_equal(run(model, src, tgt), run(plain, src, tgt)));
  model->to(torch::kDouble);  // float parameters again: converts as any module
  EXPECT_EQ(decoder->layers[0]
                ->as<mha::TransformerDecoderLayerImpl>()
                ->multihead_attn->in_proj_weight.scalar_type(),
            torch::kDouble);
}

TEST_F(PrepackTest, QuantizeDynamicOfAPrepackedModuleQuantizesItsFloatValues) {
  auto model = serving_transformer();
  auto plain = mha::Transformer(std::dynamic_pointer_cast<mha::TransformerImpl>(model->clone()));
  const Tensor tgt = torch::randn({1, 8, 512});
  mha::prepack(model, kOneDnn);
  mha::quantize_dynamic(model);
  mha::quantize_dynamic(plain);
  EXPECT_FALSE(mha::is_prepacked(*model));
  EXPECT_TRUE(mha::is_quantized(*model));
  EXPECT_TRUE(bitwise_equal(run(model, src, tgt), run(plain, src, tgt)));
}

TEST_F(PrepackTest, RefusesWhatItCannotConvertChangingNothing) {
  mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(512, 8));
  attn->to(torch::kDouble);
  MHA_ASSERT_THROWS_WITH(mha::prepack(attn, kOneDnn), "expected a 2-D float32 CPU weight");
  EXPECT_EQ(attn->in_proj_weight.numel(), 3 * 512 * 512);
  EXPECT_FALSE(mha::is_prepacked(*attn));
}

/// Prepacks `layer` (eval) and checks that its feed-forward's `activation`
/// is the packed GEMM's post-op: `agree(fused, unfused)` at 1 to 128 rows,
/// and a call runs the packed GEMM and no `unfused_op`. Returns the call on `src`.
Tensor expect_fused_feed_forward(mha::TransformerEncoderLayer& layer,
                                 mha::detail::FusedActivation activation,
                                 const char* unfused_op,
                                 const Tensor& src,
                                 const std::function<bool(const Tensor&, const Tensor&)>& agree) {
  mha::prepack(layer, kOneDnn);
  const auto form = mha::detail::linear_form(*layer->linear1);
  EXPECT_TRUE(form);
  if (!form) return Tensor();
  const Tensor& bias = layer->linear1->bias;
  const int64_t width = layer->linear1->options.in_features();
  const c10::InferenceMode inference;
  for (const int64_t m : {1, 8, 16, 48, 128}) {
    const Tensor x = torch::randn({m, width});
    const Tensor unfused = mha::detail::apply_fused_activation(activation, form->forward(x, bias));
    EXPECT_TRUE(agree(form->forward_activated(x, bias, activation), unfused)) << m;
  }
  const auto ops = ops_called([&] { run(layer, src); });
  EXPECT_TRUE(called(ops, kPackedGemmOp));
  EXPECT_FALSE(called(ops, unfused_op));
  return run(layer, src);
}

TEST_F(PrepackTest, TheFeedForwardsReluIsFusedIntoThePackedGemm) {
  // oneDNN's ReLU post-op: the GEMM followed by a ReLU, bit for bit, in one
  // op; a prepacked layer's call runs no separate aten::relu.
  mha::TransformerEncoderLayer layer = serving_layer();
  expect_fused_feed_forward(layer, mha::detail::FusedActivation::kReLU, "aten::relu", src,
                            bitwise_equal);
}

TEST_F(PrepackTest, TheFeedForwardsGeluIsFusedIntoThePackedGemm) {
  // oneDNN's exact (erf) GELU post-op: within float32 rounding of the GEMM
  // and at::gelu after it, in one op and one output tensor (BERT's layers).
  mha::TransformerEncoderLayer layer(mha::TransformerLayerOptions(768, 12)
                                         .dim_feedforward(3072)
                                         .activation(torch::kGELU)
                                         .batch_first(true));
  layer->eval();
  auto reference = copy_of(layer);
  const Tensor src768 = torch::randn({2, 16, 768});
  const Tensor out = expect_fused_feed_forward(
      layer, mha::detail::FusedActivation::kGELU, "aten::gelu", src768,
      [](const Tensor& a, const Tensor& b) { return torch::allclose(a, b, 0, 1e-6); });
  expect_close(out, run(reference, src768));
}

TEST_F(PrepackTest, DecoderLayerCallsAgreeWithTheFloatModule) {
  mha::TransformerDecoderLayer layer(
      mha::TransformerLayerOptions(512, 8).dim_feedforward(2048).batch_first(true));
  layer->eval();
  auto reference = copy_of(layer);
  mha::prepack(layer, kOneDnn);
  const Tensor tgt = torch::randn({2, 8, 512}), memory = torch::randn({2, 24, 512});
  const c10::InferenceMode inference;
  expect_close(layer(tgt, memory), reference(tgt, memory));
}

TEST_F(PrepackTest, ConcurrentCallsAgreeBitwise) {
  auto layer = serving_layer();
  mha::prepack(layer, kOneDnn);
  const Tensor expected = run(layer, src);
  std::vector<Tensor> outs(8);
  std::vector<std::thread> threads;
  for (auto& out : outs) threads.emplace_back([&] { out = run(layer, src); });
  for (auto& t : threads) t.join();
  for (const auto& out : outs) EXPECT_TRUE(bitwise_equal(out, expected));
}

/// Each request of `inputs` (per request: its rows per step) served with the
/// others by a batch-invariant ContinuousBatch with GEMM row blocks of
/// `block_rows` is bitwise the request served alone, step for step.
void expect_bitwise_per_request(mha::TransformerEncoder& stack,
                                const std::vector<std::vector<Tensor>>& inputs,
                                int64_t block_rows) {
  const auto options = mha::ContinuousBatchOptions()
                           .block_size(16)
                           .num_blocks(32)
                           .batch_invariant(true)
                           .invariant_rows(block_rows);
  std::vector<std::vector<Tensor>> expected;
  for (const auto& request : inputs) {
    mha::ContinuousBatch alone(stack, options);
    const int64_t id = alone.add();
    expected.emplace_back();
    for (const auto& x : request) expected.back().push_back(alone.step({{id, x}}).at(id));
  }
  mha::ContinuousBatch batch(stack, options);
  std::vector<int64_t> ids;
  for (size_t r = 0; r < inputs.size(); ++r) ids.push_back(batch.add());
  for (size_t step = 0; step < inputs[0].size(); ++step) {
    std::map<int64_t, Tensor> rows;
    for (size_t r = 0; r < inputs.size(); ++r) rows[ids[r]] = inputs[r][step];
    const auto outs = batch.step(rows);
    for (size_t r = 0; r < inputs.size(); ++r) {
      EXPECT_TRUE(bitwise_equal(outs.at(ids[r]), expected[r][step]))
          << "request " << r << ", step " << step << ", invariant_rows " << block_rows;
    }
  }
}

/// Three requests of a prepacked causal stack (E = 512) decoded alone and
/// together in batch-invariant mode: the same bits, step for step, with GEMM
/// row blocks of 8 (several per step) and of 32 (one per step).
TEST_F(PrepackTest, BatchInvariantServingIsBitwisePerRequest) {
  mha::TransformerEncoder stack(
      mha::TransformerEncoderOptions(
          mha::TransformerEncoderLayer(
              mha::TransformerEncoderLayerOptions(512, 8).dim_feedforward(2048).dropout(0.0)),
          2)
          .enable_nested_tensor(false));
  stack->eval();
  mha::prepack(stack, kOneDnn);
  std::vector<std::vector<Tensor>> inputs;  // per request: a prompt (L, E), then single rows
  for (int64_t r = 0; r < 3; ++r) {
    inputs.push_back({torch::randn({3 + 5 * r, 512})});
    for (int step = 0; step < 3; ++step) inputs.back().push_back(torch::randn({1, 512}));
  }
  const c10::InferenceMode inference;
  for (const int64_t block_rows : {8, 32}) expect_bitwise_per_request(stack, inputs, block_rows);
}

}  // namespace
