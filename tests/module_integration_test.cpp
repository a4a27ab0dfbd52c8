// LibTorch integration of every mha module: forward defaults through AnyModule
// and Sequential (Python's defaults), clone() as a deep copy that leaves the
// global RNG alone (as Python's copy.deepcopy), torch::save/torch::load round
// trips bit for bit, and the fast-path guard.

#include <mha/layer_norm.h>
#include <mha/multihead_attention.h>
#include <mha/transformer.h>

#include <functional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "module_state.h"
#include "support.h"

namespace {

using mha::test::bitwise_equal;
using torch::Tensor;

mha::TransformerLayerOptions layer_options() {
  return mha::TransformerLayerOptions(8, 2).dim_feedforward(16).dropout(0.0);
}

mha::TransformerEncoder make_encoder() {
  return mha::TransformerEncoder(
      mha::TransformerEncoderOptions(mha::TransformerEncoderLayer(layer_options()), 2)
          .norm(torch::nn::AnyModule(mha::LayerNorm(mha::LayerNormOptions({8})))));
}

mha::TransformerDecoder make_decoder() {
  return mha::TransformerDecoder(
      mha::TransformerDecoderOptions(mha::TransformerDecoderLayer(layer_options()), 2));
}

mha::Transformer make_transformer() {
  return mha::Transformer(mha::TransformerOptions(8, 2, 2, 2).dim_feedforward(16).dropout(0.0));
}

/// One module of each mha class, built from the current seed, with the call
/// that runs it on its own (L=5 or T=4, N=3, E=8) inputs with every default.
struct Case {
  std::string name;
  std::function<std::shared_ptr<torch::nn::Module>()> make;
  std::function<Tensor(torch::nn::Module&)> run;
};

/// gtest prints a case by its name (in test names and failures).
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> cases() {
  const auto src = [] { return torch::ones({5, 3, 8}).cumsum(0).sin(); };  // (S, N, E)
  const auto tgt = [] { return torch::ones({4, 3, 8}).cumsum(2).cos(); };  // (T, N, E)
  return {
      {"MultiheadAttention",
       [] { return mha::MultiheadAttention(mha::MultiheadAttentionOptions(8, 2)).ptr(); },
       [=](torch::nn::Module& m) {
         const Tensor x = src();
         return std::get<0>(m.as<mha::MultiheadAttentionImpl>()->forward(x, x, x));
       }},
      {"MultiheadAttentionSeparateBiasKv",
       [] {
         return mha::MultiheadAttention(
                    mha::MultiheadAttentionOptions(8, 2).kdim(6).vdim(4).add_bias_kv(true))
             .ptr();
       },
       [=](torch::nn::Module& m) {
         const Tensor x = src();
         return std::get<0>(
             m.as<mha::MultiheadAttentionImpl>()->forward(x, x.narrow(2, 0, 6), x.narrow(2, 0, 4)));
       }},
      {"LayerNorm", [] { return mha::LayerNorm(mha::LayerNormOptions({8})).ptr(); },
       [=](torch::nn::Module& m) { return m.as<mha::LayerNormImpl>()->forward(src()); }},
      {"TransformerEncoderLayer",
       [] { return mha::TransformerEncoderLayer(layer_options()).ptr(); },
       [=](torch::nn::Module& m) {
         return m.as<mha::TransformerEncoderLayerImpl>()->forward(src());
       }},
      {"TransformerDecoderLayer",
       [] { return mha::TransformerDecoderLayer(layer_options()).ptr(); },
       [=](torch::nn::Module& m) {
         return m.as<mha::TransformerDecoderLayerImpl>()->forward(tgt(), src());
       }},
      {"TransformerEncoder", [] { return make_encoder().ptr(); },
       [=](torch::nn::Module& m) { return m.as<mha::TransformerEncoderImpl>()->forward(src()); }},
      {"TransformerDecoder", [] { return make_decoder().ptr(); },
       [=](torch::nn::Module& m) {
         return m.as<mha::TransformerDecoderImpl>()->forward(tgt(), src());
       }},
      {"Transformer", [] { return make_transformer().ptr(); },
       [=](torch::nn::Module& m) { return m.as<mha::TransformerImpl>()->forward(src(), tgt()); }},
  };
}

/// Fails unless both modules hold the same parameter and buffer names and bytes.
::testing::AssertionResult same_state(const torch::nn::Module& a, const torch::nn::Module& b) {
  const std::string difference =
      mha::support::state_difference(mha::support::snapshot(a), mha::support::snapshot(b));
  if (difference.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << difference;
}

class ModuleIntegration : public mha::test::SeedingFixture,
                          public ::testing::WithParamInterface<Case> {};

TEST_P(ModuleIntegration, CloneIsDeepAndLeavesTheGlobalRngAlone) {
  const auto module = GetParam().make();
  module->eval();
  torch::manual_seed(3);
  const Tensor expected = torch::rand({16});  // the draws after seed 3, with no clone between
  torch::manual_seed(3);
  const auto copy = module->clone();
  const Tensor after_clone = torch::rand({16});
  EXPECT_TRUE(bitwise_equal(after_clone, expected)) << "clone() moved the global RNG";
  EXPECT_TRUE(same_state(*copy, *module));
  EXPECT_FALSE(copy->parameters()[0].is_same(module->parameters()[0]));
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(bitwise_equal(GetParam().run(*copy), GetParam().run(*module)));
}

TEST_P(ModuleIntegration, TorchSaveAndLoadRoundTripBitForBit) {
  const auto saved = GetParam().make();
  saved->eval();
  {
    torch::NoGradGuard no_grad;  // non-default values in every parameter, biases included
    for (auto& p : saved->parameters()) p.add_(torch::randn_like(p));
  }
  std::stringstream archive;
  {
    torch::serialize::OutputArchive output;
    saved->save(output);
    output.save_to(archive);
  }
  torch::manual_seed(99);
  const auto loaded = GetParam().make();
  loaded->eval();
  ASSERT_FALSE(same_state(*loaded, *saved));
  torch::serialize::InputArchive input;
  input.load_from(archive);
  loaded->load(input);
  EXPECT_TRUE(same_state(*loaded, *saved));
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(bitwise_equal(GetParam().run(*loaded), GetParam().run(*saved)));
}

INSTANTIATE_TEST_SUITE_P(EveryModule,
                         ModuleIntegration,
                         ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

// torch::save / torch::load on the module holders, as a LibTorch user writes it.
TEST(ModuleSerialization, TorchSaveAndLoadTakeTheHolders) {
  torch::manual_seed(0);
  auto saved = make_transformer();
  std::stringstream archive;
  torch::save(saved, archive);
  torch::manual_seed(1);
  auto loaded = make_transformer();
  torch::load(loaded, archive);
  EXPECT_TRUE(same_state(*loaded, *saved));
}

// AnyModule and Sequential fill Python's defaults (masks None, is_causal
// False/None): the same bits as the direct call with every default.
TEST(ForwardDefaults, AnyModuleFillsPythonsDefaultsForEveryTransformerClass) {
  torch::manual_seed(0);
  torch::NoGradGuard no_grad;
  const Tensor src = torch::randn({5, 3, 8}), tgt = torch::randn({4, 3, 8});
  auto encoder_layer = mha::TransformerEncoderLayer(layer_options());
  auto decoder_layer = mha::TransformerDecoderLayer(layer_options());
  auto encoder = make_encoder();
  auto decoder = make_decoder();
  auto transformer = make_transformer();
  EXPECT_TRUE(bitwise_equal(torch::nn::AnyModule(encoder_layer).forward(src), encoder_layer(src)));
  EXPECT_TRUE(bitwise_equal(torch::nn::AnyModule(decoder_layer).forward(tgt, src),
                            decoder_layer(tgt, src)));
  EXPECT_TRUE(bitwise_equal(torch::nn::AnyModule(encoder).forward(src), encoder(src)));
  EXPECT_TRUE(bitwise_equal(torch::nn::AnyModule(decoder).forward(tgt, src), decoder(tgt, src)));
  EXPECT_TRUE(
      bitwise_equal(torch::nn::AnyModule(transformer).forward(src, tgt), transformer(src, tgt)));
  // A mask given positionally is passed through, the rest defaulted.
  const Tensor causal = mha::generate_square_subsequent_mask(5);
  EXPECT_TRUE(
      bitwise_equal(torch::nn::AnyModule(encoder).forward(src, causal), encoder(src, causal)));
}

TEST(ForwardDefaults, SequentialChainsTransformerLayersWithDefaults) {
  torch::manual_seed(0);
  torch::NoGradGuard no_grad;
  auto first = mha::TransformerEncoderLayer(layer_options());
  auto second = mha::TransformerEncoderLayer(layer_options());
  torch::nn::Sequential stack(first, second);
  const Tensor src = torch::randn({5, 3, 8});
  EXPECT_TRUE(bitwise_equal(stack->forward(src), second(first(src))));
  torch::nn::Sequential model(make_transformer());
  const Tensor tgt = torch::randn({4, 3, 8});
  EXPECT_EQ(model->forward(src, tgt).sizes(), tgt.sizes());
}

TEST(FastPathGuard, SetsForTheScopeAndRestoresThePreviousValue) {
  ASSERT_TRUE(mha::get_fastpath_enabled());
  {
    const mha::FastPathGuard off(false);
    EXPECT_FALSE(mha::get_fastpath_enabled());
    {
      const mha::FastPathGuard on(true);
      EXPECT_TRUE(mha::get_fastpath_enabled());
    }
    EXPECT_FALSE(mha::get_fastpath_enabled());
  }
  EXPECT_TRUE(mha::get_fastpath_enabled());
}

TEST(PythonKernelsGuard, SetsForTheScopeAndRestoresThePreviousValue) {
  ASSERT_FALSE(mha::python_kernels_enabled());  // off by default
  {
    const mha::PythonKernelsGuard on;
    EXPECT_TRUE(mha::python_kernels_enabled());
    {
      const mha::PythonKernelsGuard off(false);
      EXPECT_FALSE(mha::python_kernels_enabled());
    }
    EXPECT_TRUE(mha::python_kernels_enabled());
  }
  EXPECT_FALSE(mha::python_kernels_enabled());
  mha::set_python_kernels(true);
  EXPECT_TRUE(mha::python_kernels_enabled());
  mha::set_python_kernels(false);
}

}  // namespace
