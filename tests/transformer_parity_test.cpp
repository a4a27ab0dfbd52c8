// Parity with Python's Transformer classes: each case written by
// scripts/export_transformer_reference.py (from the installed torch, at test
// time) is rebuilt in C++ from the same seed, loaded strictly with Python's
// state_dict, run, and compared: initialisation, output, input and parameter
// gradients; again with Python's kernels (mha::PythonKernelsGuard), where every
// number must be Python's bits. Then the two real checkpoints. Prints how many
// cases are bitwise equal.

#include <mha/state_dict.h>
#include <mha/transformer.h>

#include <fstream>
#include <iostream>

#include "dtype_names.h"
#include "parity_report.h"
#include "silent_warnings.h"
#include "support.h"
#include "tolerances.h"
#include "transformer_reference.h"

namespace {

using mha::test::bitwise_equal;
using mha::test::tensors_close;
using mha::test::TransformerCase;
using torch::Tensor;

std::string reference_dir() {
  const char* dir = std::getenv("MHA_TRANSFORMER_REFERENCE_DIR");
  return dir ? dir : MHA_TRANSFORMER_REFERENCE_DIR;
}

/// Printed after the suite (not deleted: gtest owns registered environments).
mha::support::BitwiseReport& report() {
  static auto* const r =
      static_cast<mha::support::BitwiseReport*>(::testing::AddGlobalTestEnvironment(
          new mha::support::BitwiseReport("transformer parity", "output, gradients")));
  return *r;
}
const auto& kReport = report();

using mha::test::ParityParam;

class TransformerParity : public ::testing::TestWithParam<ParityParam> {
 protected:
  void SetUp() override { torch::set_num_threads(1); }  // as the export script

 private:
  // Python's notices (use_nested_tensor off, mismatched mask dtypes, nested
  // tensors in prototype) are expected here; transformer_test.cpp checks them.
  mha::support::SilentWarnings silent_;
  c10::WarningUtils::WarningHandlerGuard guard_{&silent_};
};

TEST_P(TransformerParity, MatchesPython) {
  const auto& [name, python_kernels] = GetParam();
  const mha::PythonKernelsGuard kernels(python_kernels);
  const TransformerCase ref =
      mha::test::read_transformer_case(reference_dir() + "/" + name + ".pt");
  const c10::ScalarType dtype = mha::support::dtype_from_name(ref.dtype);
  const auto [rtol, atol] = mha::support::parity_tolerance(dtype);
  bool bitwise = true;
  auto compare = [&](const Tensor& actual, const Tensor& expected, const std::string& what) {
    ASSERT_TRUE(actual.defined()) << what << " is undefined";
    EXPECT_TRUE(tensors_close(actual, expected, rtol, atol)) << what;
    bitwise = bitwise && bitwise_equal(actual, expected);
  };

  // Python's initialisation from the same seed: names, order and values.
  torch::manual_seed(ref.init_seed);
  mha::test::BuiltModule built = mha::test::build_module(ref);
  const auto init = built.module->named_parameters();
  ASSERT_EQ(init.size(), ref.init_state_dict.size());
  for (size_t i = 0; i < init.size(); ++i) {
    ASSERT_EQ(init.keys()[i], ref.init_state_dict[i].first) << "parameter order";
    EXPECT_TRUE(bitwise_equal(init.values()[i].detach(), ref.init_state_dict[i].second))
        << "init of " << init.keys()[i];
  }

  // Python's weights, loaded strictly by name.
  built.module->to(dtype);
  mha::load_state_dict(*built.module,
                       std::map<std::string, Tensor>(ref.state_dict.begin(), ref.state_dict.end()));
  built.module->train(ref.training);
  std::map<std::string, Tensor> inputs;
  for (const auto& [name, t] : ref.inputs) {
    const bool leaf = name == "src" || name == "tgt" || name == "memory";
    inputs[name] = leaf ? t.clone().requires_grad_(ref.grad) : t;
  }

  torch::manual_seed(ref.forward_seed);
  Tensor out;
  {
    torch::AutoGradMode grad_mode(ref.grad);
    out = built.forward(inputs);
  }
  compare(out, ref.expected_output, "output");
  if (ref.grad) {
    (out * ref.cotangent).sum().backward();
    const auto params = built.module->named_parameters();
    for (const auto& [name, expected] : ref.grads) {
      const Tensor actual =
          name.rfind("param.", 0) == 0 ? params[name.substr(6)].grad() : inputs.at(name).grad();
      compare(actual, expected, "gradient of " + name);
    }
  }
  if (python_kernels) {
    EXPECT_TRUE(bitwise) << "with Python's kernels every number must be Python's bits";
  } else {
    report().add(ref.dtype, ref.name, bitwise);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Python,
    TransformerParity,
    mha::test::both_kernel_choices(mha::support::read_manifest(reference_dir())),
    mha::test::parity_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TransformerParity);

TEST(TransformerParityManifest, HasTheMatrix) {
  EXPECT_GE(mha::support::read_manifest(reference_dir()).size(), 100u)
      << "run `python scripts/export_transformer_reference.py --out " << reference_dir() << "`";
}

/// A `torch.save(nn.Transformer(...).state_dict())` checkpoint, loaded strictly.
TEST(TransformerCheckpoint, TransformerLoadsStrictlyAndMatches) {
  torch::set_num_threads(1);
  mha::Transformer model(mha::TransformerOptions(16, 4, 2, 2).dim_feedforward(32));
  mha::load_state_dict(*model, reference_dir() + "/checkpoint_transformer.pt");
  model->eval();
  const auto io = mha::test::read_tensors(reference_dir() + "/checkpoint_transformer.io.pt");
  torch::NoGradGuard no_grad;
  const Tensor out = model(io.at("src"), io.at("tgt"), Tensor(), io.at("tgt_mask"));
  const auto [rtol, atol] = mha::support::parity_tolerance(torch::kFloat);
  EXPECT_TRUE(tensors_close(out, io.at("output"), rtol, atol));
  std::cout << "checkpoint nn.Transformer: bitwise equal to Python: "
            << (bitwise_equal(out, io.at("output")) ? "yes" : "no") << "\n";
  const mha::PythonKernelsGuard pythons;
  EXPECT_TRUE(bitwise_equal(model(io.at("src"), io.at("tgt"), Tensor(), io.at("tgt_mask")),
                            io.at("output")))
      << "with Python's kernels";
}

/// A 6-layer nn.TransformerEncoder with a final norm, on the nested-tensor path.
TEST(TransformerCheckpoint, SixLayerEncoderLoadsStrictlyAndMatches) {
  torch::set_num_threads(1);
  mha::TransformerEncoderLayer layer(
      mha::TransformerEncoderLayerOptions(32, 4).dim_feedforward(64).batch_first(true));
  mha::TransformerEncoder encoder(mha::TransformerEncoderOptions(layer, 6).norm(
      torch::nn::AnyModule(mha::LayerNorm(std::vector<int64_t>{32}))));
  mha::load_state_dict(*encoder, reference_dir() + "/checkpoint_encoder6.pt");
  encoder->eval();
  const auto io = mha::test::read_tensors(reference_dir() + "/checkpoint_encoder6.io.pt");
  torch::NoGradGuard no_grad;
  const Tensor out = encoder(io.at("src"), Tensor(), io.at("src_key_padding_mask"));
  const auto [rtol, atol] = mha::support::parity_tolerance(torch::kFloat);
  EXPECT_TRUE(tensors_close(out, io.at("output"), rtol, atol));
  std::cout << "checkpoint 6-layer nn.TransformerEncoder: bitwise equal to Python: "
            << (bitwise_equal(out, io.at("output")) ? "yes" : "no") << "\n";
  const mha::PythonKernelsGuard pythons;
  EXPECT_TRUE(bitwise_equal(encoder(io.at("src"), Tensor(), io.at("src_key_padding_mask")),
                            io.at("output")))
      << "with Python's kernels";
}

/// A NestedTensor input in eval: Python's encoder returns a nested output
/// (its sequence length is None, `_get_seq_len`), sequence for sequence: on
/// the layers' fast path, and in layers that decline it (an activation given
/// as a function), whose attention then runs Python's native op on the nested
/// query.
TEST(TransformerCheckpoint, EncoderTakesANestedTensorAsPythonDoes) {
  torch::set_num_threads(1);
  const auto io = mha::test::read_tensors(reference_dir() + "/checkpoint_encoder_nested.io.pt");
  const std::vector<Tensor> inputs{io.at("sequence0"), io.at("sequence1")};
  const auto [rtol, atol] = mha::support::parity_tolerance(torch::kFloat);
  for (const bool by_function : {false, true}) {
    auto layer_options =
        mha::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16).batch_first(true);
    if (by_function) {
      layer_options.activation([](const Tensor& x) { return torch::relu(x); });
    }
    mha::TransformerEncoder encoder(
        mha::TransformerEncoderOptions(mha::TransformerEncoderLayer(layer_options), 2)
            .enable_nested_tensor(!by_function));
    mha::load_state_dict(*encoder, reference_dir() + "/checkpoint_encoder_nested.pt");
    encoder->eval();
    torch::NoGradGuard no_grad;
    const Tensor out = encoder(torch::nested::nested_tensor(inputs));  // nested: (2, 8), (3, 8)
    ASSERT_TRUE(out.is_nested()) << by_function;
    const auto sequences = out.unbind();
    ASSERT_EQ(sequences.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      const Tensor& expected =
          io.at(std::string(by_function ? "function_output" : "output") + std::to_string(i));
      EXPECT_TRUE(tensors_close(sequences[i], expected, rtol, atol)) << by_function << " " << i;
      EXPECT_TRUE(bitwise_equal(sequences[i], expected)) << "Python's kernels, Python's bits";
    }
  }
}

}  // namespace
