// int8 modules (mha::quantize_dynamic) against Python: each case of
// scripts/export_int8_reference.py (written at test time by the installed
// torch) gives the float weights, the inputs, Python's int8 values and scales
// and Python's outputs with the same int8 GEMMs; mha's must be bitwise equal.
// Then save/load, the errors, and the fallback when FBGEMM is not there.

#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <mha/mha.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "linear/int8_linear.h"
#include "support.h"

namespace {

using mha::test::bitwise_equal;
using torch::Tensor;

std::string reference_dir() {
  const char* dir = std::getenv("MHA_INT8_REFERENCE_DIR");
  return dir ? dir : MHA_INT8_REFERENCE_DIR;
}

std::vector<std::string> case_names() {
  std::ifstream manifest(reference_dir() + "/manifest.txt");
  std::vector<std::string> names;
  for (std::string line; std::getline(manifest, line);) {
    if (!line.empty()) names.push_back(line);
  }
  return names;
}

/// One case's file, and the module it describes with the float weights loaded.
struct Int8Case {
  std::map<std::string, Tensor> file;
  std::shared_ptr<torch::nn::Module> module;
  std::function<std::tuple<Tensor, Tensor>()> call;  // (output, weights or undefined)

  int64_t config(const std::string& name) const { return file.at("config." + name).item<int64_t>(); }
  Tensor input(const std::string& name) const {
    const auto it = file.find("input." + name);
    return it == file.end() ? Tensor() : it->second;
  }
  mha::QuantizeOptions options() const {
    return mha::QuantizeOptions()
        .attention(config("attention") != 0)
        .linears(config("linears") != 0)
        .recipe(config("recipe") == 1 ? mha::QuantizeRecipe::kTorchAoDefault
                                      : mha::QuantizeRecipe::kPerChannel);
  }
};

std::optional<int64_t> optional_dim(int64_t value) {
  return value < 0 ? std::nullopt : std::optional<int64_t>(value);
}

void build_mha(Int8Case& c) {
  const auto options = mha::MultiheadAttentionOptions(c.config("e"), c.config("heads"))
                           .bias(c.config("bias") != 0)
                           .kdim(optional_dim(c.config("kdim")))
                           .vdim(optional_dim(c.config("vdim")))
                           .batch_first(c.config("batch_first") != 0);
  mha::MultiheadAttention attn(options);
  c.module = attn.ptr();
  c.call = [&c, attn]() mutable {
    const Tensor q = c.input("query");
    const Tensor k = c.input("key").defined() ? c.input("key") : q;
    const Tensor v = c.input("value").defined() ? c.input("value") : k;
    return attn(q, k, v, c.input("key_padding_mask"), c.config("need_weights") != 0,
                c.input("attn_mask"));
  };
}

mha::TransformerLayerOptions layer_options(const Int8Case& c) {
  auto options = mha::TransformerLayerOptions(c.config("e"), c.config("heads"))
                     .dim_feedforward(c.config("ff"))
                     .dropout(0.0)
                     .bias(c.config("bias") != 0)
                     .batch_first(c.config("batch_first") != 0)
                     .norm_first(c.config("norm_first") != 0);
  if (c.config("gelu") != 0) options.activation(torch::kGELU);
  return options;
}

void build_layer(Int8Case& c) {
  if (c.config("kind") == 2) {
    mha::TransformerEncoderLayer layer(layer_options(c));
    c.module = layer.ptr();
    c.call = [&c, layer]() mutable {
      return std::make_tuple(
          layer(c.input("query"), c.input("attn_mask"), c.input("key_padding_mask")), Tensor());
    };
    return;
  }
  mha::TransformerDecoderLayer layer(layer_options(c));
  c.module = layer.ptr();
  c.call = [&c, layer]() mutable {
    return std::make_tuple(layer(c.input("query"), c.input("memory"), c.input("attn_mask"),
                                 Tensor(), Tensor(), c.input("memory_key_padding_mask")),
                           Tensor());
  };
}

Int8Case load_case(const std::string& name) {
  Int8Case c;
  c.file = mha::read_state_dict(reference_dir() + "/" + name + ".pt");
  switch (c.config("kind")) {
    case 0: {
      torch::nn::Linear linear(torch::nn::LinearOptions(c.config("e"), c.config("out_features"))
                                   .bias(c.config("bias") != 0));
      c.module = linear.ptr();
      c.call = [&c, linear]() { return std::make_tuple(mha::linear(linear, c.input("query")), Tensor()); };
      break;
    }
    case 1:
      build_mha(c);
      break;
    default:
      build_layer(c);
  }
  mha::load_state_dict(*c.module, c.file, mha::LoadOptions().prefix("model."));
  c.module->eval();
  return c;
}

/// Python's int8 values and scales of every converted weight equal mha's.
void expect_python_int8_state(const Int8Case& c) {
  int64_t compared = 0;
  for (const auto& [name, tensor] : mha::state_dict(*c.module)) {
    const auto it = c.file.find("int8." + name);
    const bool is_scale = name.size() > 6 && name.compare(name.size() - 6, 6, "_scale") == 0;
    if (tensor.scalar_type() == torch::kChar || is_scale) {
      ASSERT_NE(it, c.file.end()) << name << " is int8 in mha but not in Python's reference";
      EXPECT_TRUE(bitwise_equal(tensor, it->second)) << name;
      ++compared;
    } else {
      EXPECT_EQ(it, c.file.end()) << name << " is int8 in Python's reference but not in mha";
    }
  }
  int64_t expected = 0;
  for (const auto& [key, tensor] : c.file) expected += key.rfind("int8.", 0) == 0 ? 1 : 0;
  EXPECT_EQ(compared, expected);
}

class Int8Parity : public ::testing::TestWithParam<mha::test::ParityParam> {};

TEST_P(Int8Parity, MatchesPythonBitwise) {
  const auto& [name, python_kernels] = GetParam();
  Int8Case c = load_case(name);
  mha::quantize_dynamic(*c.module, c.options());
  ASSERT_TRUE(mha::is_quantized(*c.module));
  expect_python_int8_state(c);
  mha::PythonKernelsGuard kernels(python_kernels);
  torch::NoGradGuard no_grad;
  const auto [output, weights] = c.call();
  const Tensor& expected = c.file.at("expected.output");
  std::printf("%s: max |mha - Python| %.3g; int8 vs float32 (information) max %.3g\n",
              name.c_str(), (output - expected).abs().max().item<double>(),
              (expected - c.file.at("float.output")).abs().max().item<double>());
  EXPECT_TRUE(bitwise_equal(output, expected))
      << mha::test::tensors_close(output, expected, 0, 0).message();
  if (c.file.count("expected.weights") != 0) {
    EXPECT_TRUE(bitwise_equal(weights, c.file.at("expected.weights")));
  }
  if (c.file.count("torch_ao.output") != 0) {
    // torch.ao's own int8 Linear adds the bias in FBGEMM's epilogue: one rounding apart.
    EXPECT_TRUE(mha::test::tensors_close(output, c.file.at("torch_ao.output"), 1e-6, 1e-6));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases,
                         Int8Parity,
                         mha::test::both_kernel_choices(case_names()),
                         mha::test::parity_test_name);

}  // namespace
