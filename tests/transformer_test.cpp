// Unit tests of mha's Transformer classes: deep copies, printing, causal-mask
// helpers, Python's nested-tensor warning, custom encoders, and bad input
// (a c10::Error naming the argument, expected and actual, module unchanged).
// Numbers against Python are in transformer_parity_test.cpp.

#include <ATen/record_function.h>
#include <mha/transformer.h>

#include <algorithm>
#include <functional>
#include <sstream>

#include "module_state.h"
#include "silent_warnings.h"
#include "support.h"

namespace {

using mha::support::snapshot;
using mha::support::state_difference;
using torch::Tensor;

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
  mha::support::CollectedWarnings warnings;
  c10::WarningUtils::WarningHandlerGuard guard(&warnings);
  mha::TransformerEncoder encoder(
      mha::TransformerEncoderOptions(mha::TransformerEncoderLayer(small()), 1));
  EXPECT_FALSE(encoder->use_nested_tensor);
  ASSERT_EQ(warnings.messages.size(), 1u);
  EXPECT_NE(warnings.messages[0].find("enable_nested_tensor is True, but "
                                      "self.use_nested_tensor is False because "
                                      "encoder_layer.self_attn.batch_first was not True"),
            std::string::npos);
  mha::TransformerEncoder fast(
      mha::TransformerEncoderOptions(mha::TransformerEncoderLayer(small(true)), 1));
  EXPECT_TRUE(fast->use_nested_tensor);
  EXPECT_EQ(warnings.messages.size(), 1u);
}

/// The ATen ops `call` dispatches on this thread (a RecordFunction observer).
std::vector<std::string> ops_called(const std::function<void()>& call) {
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

bool called(const std::vector<std::string>& ops, const std::string& op) {
  return std::find(ops.begin(), ops.end(), op) != ops.end();
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
  mha::set_fastpath_enabled(false);
  EXPECT_FALSE(called(ops_called([&] { fast(src); }), op));
  mha::set_fastpath_enabled(true);
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

/// A forward that must throw c10::Error containing `message` and change nothing.
void expect_rejected(torch::nn::Module& module,
                     const std::function<void()>& call,
                     const std::string& message) {
  const auto before = snapshot(module);
  MHA_ASSERT_THROWS_WITH(call(), message);
  EXPECT_EQ(state_difference(snapshot(module), before), "");
}

TEST(TransformerBadInput, ConstructionNamesDModelAndNhead) {
  MHA_ASSERT_THROWS_WITH(mha::TransformerEncoderLayer(8, 3),
                         "nhead must be positive and divide d_model, but got d_model=8, nhead=3");
  MHA_ASSERT_THROWS_WITH(mha::TransformerDecoderLayer(8, 0), "d_model=8, nhead=0");
  MHA_ASSERT_THROWS_WITH(mha::Transformer(mha::TransformerOptions(10, 4, 1, 1)),
                         "d_model=10, nhead=4");
}

TEST(TransformerBadInput, EncoderLayerNamesItsArguments) {
  for (const bool fast : {false, true}) {  // the slow path and Python's fast path
    SCOPED_TRACE(fast ? "eval, no grad, batch_first" : "train, grad");
    mha::TransformerEncoderLayer layer(small(fast));
    layer->train(!fast);
    torch::AutoGradMode grad(!fast);
    const Tensor src = torch::randn({3, 5, 8});  // (N, L, E) or (L, N, E): both 3 x 5
    const int64_t batch = fast ? 3 : 5, len = fast ? 5 : 3;
    auto run = [&](Tensor x, Tensor mask, Tensor kpm) { layer(x, mask, kpm); };
    expect_rejected(
        *layer, [&] { run(torch::randn({3, 5, 6}), {}, {}); },
        "src must have d_model=8 features in its last dimension, but got shape "
        "torch.Size([3, 5, 6])");
    expect_rejected(
        *layer, [&] { run(src, torch::zeros({len, len + 1}), {}); }, "src_mask must have shape");
    expect_rejected(
        *layer, [&] { run(src, torch::zeros({len, len}, torch::kInt), {}); },
        "only bool and floating types of src_mask are supported, but got Int");
    expect_rejected(
        *layer, [&] { run(src, {}, torch::zeros({batch + 1, len}, torch::kBool)); },
        "src_key_padding_mask must have shape");
    expect_rejected(
        *layer, [&] { run(src, {}, torch::zeros({batch, len}, torch::kLong)); },
        "only bool and floating types of src_key_padding_mask");
  }
}

TEST(TransformerBadInput, DecoderAndStacksNameTheirArguments) {
  mha::TransformerDecoderLayer layer(small());
  const Tensor tgt = torch::randn({4, 3, 8}), memory = torch::randn({5, 3, 8});
  expect_rejected(
      *layer, [&] { layer(tgt, torch::randn({5, 2, 8})); },
      "memory must have tgt's batch size 3, but got 2");
  expect_rejected(
      *layer, [&] { layer(tgt, torch::randn({5, 3, 4})); }, "memory must have d_model=8 features");
  expect_rejected(
      *layer, [&] { layer(tgt, memory, Tensor(), torch::zeros({4, 4})); },
      "memory_mask must have shape (4, 5) or (6, 4, 5), but got torch.Size([4, 4])");
  expect_rejected(
      *layer, [&] { layer(tgt, memory, Tensor(), Tensor(), Tensor(), torch::zeros({3, 4})); },
      "memory_key_padding_mask must have shape (3, 5), but got torch.Size([3, 4])");

  mha::TransformerEncoder encoder(
      mha::TransformerEncoderOptions(mha::TransformerEncoderLayer(small(true)), 2));
  encoder->eval();
  torch::NoGradGuard no_grad;  // the nested-tensor path's conditions
  const Tensor src = torch::randn({3, 5, 8});
  expect_rejected(
      *encoder, [&] { encoder(src, Tensor(), torch::zeros({3, 4}, torch::kBool)); },
      "src_key_padding_mask must have shape (3, 5), but got torch.Size([3, 4])");
  expect_rejected(
      *encoder, [&] { encoder(src, torch::zeros({2, 5, 5})); },
      "mask must have shape (5, 5) or (6, 5, 5), but got torch.Size([2, 5, 5])");

  mha::Transformer model(mha::TransformerOptions(8, 2, 1, 1).dim_feedforward(16));
  expect_rejected(
      *model, [&] { model(torch::randn({5, 3, 8}), torch::randn({4, 2, 8})); },
      "the batch number of src and tgt must be equal");
  expect_rejected(
      *model, [&] { model(torch::randn({5, 3, 8}), torch::randn({4, 3, 6})); },
      "the feature number of src and tgt must be equal to d_model=8");
}

}  // namespace
