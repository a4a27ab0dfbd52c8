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
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "linear/int8_linear.h"
#include "parity_report.h"
#include "support.h"

namespace {

using mha::test::bitwise_equal;
using torch::Tensor;

std::string reference_dir() {
  const char* dir = std::getenv("MHA_INT8_REFERENCE_DIR");
  return dir ? dir : MHA_INT8_REFERENCE_DIR;
}

std::vector<std::string> case_names() { return mha::support::read_manifest(reference_dir()); }

/// One case's file, and the module it describes with the float weights loaded.
struct Int8Case {
  std::map<std::string, Tensor> file;
  std::shared_ptr<torch::nn::Module> module;
  std::function<std::tuple<Tensor, Tensor>()> call;  // (output, weights or undefined)

  int64_t config(const std::string& name) const {
    return file.at("config." + name).item<int64_t>();
  }
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
      c.call = [&c, linear]() {
        return std::make_tuple(mha::linear(linear, c.input("query")), Tensor());
      };
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
  std::printf("%s: max |mha - Python| %.3g; int8 vs float32 (information) max %.3g\n", name.c_str(),
              (output - expected).abs().max().item<double>(),
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

/// A quantized encoder layer of the reference's weights, and its call.
struct QuantizedLayer {
  Int8Case c = load_case("EncoderLayer");
  QuantizedLayer() { mha::quantize_dynamic(*c.module, c.options()); }
  Tensor output() {
    torch::NoGradGuard no_grad;
    return std::get<0>(c.call());
  }
  /// The reference's float weights, times `factor`, without the "model." prefix.
  std::map<std::string, Tensor> float_weights(double factor) const {
    std::map<std::string, Tensor> weights;
    for (const auto& [key, tensor] : c.file) {
      if (key.rfind("model.", 0) == 0) weights.emplace(key.substr(6), tensor * factor);
    }
    return weights;
  }
};

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/mha_int8_" + name;
}

std::map<std::string, Tensor> module_state(const torch::nn::Module& module) {
  std::map<std::string, Tensor> state;
  for (const auto& [name, tensor] : mha::state_dict(module)) state.emplace(name, tensor.clone());
  return state;
}

bool same_state(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, tensor] : a) {
    const auto it = b.find(name);
    if (it == b.end() || !bitwise_equal(tensor, it->second)) return false;
  }
  return true;
}

TEST(Int8SaveLoad, RoundTripsThroughBothFormats) {
  QuantizedLayer saved;
  for (const std::string extension : {".safetensors", ".pt"}) {
    const std::string path = temp_path("layer" + extension);
    mha::save_state_dict(*saved.c.module, path);
    const auto file = mha::read_state_dict(path);
    EXPECT_EQ(file.at("self_attn.in_proj_weight").scalar_type(), torch::kChar);
    EXPECT_EQ(file.at("self_attn.in_proj_weight_scale").scalar_type(), torch::kDouble);
    EXPECT_EQ(file.at("linear1.weight_scale").sizes(), torch::IntArrayRef({64}));
    QuantizedLayer loaded;  // other weights first, then the file: the saved layer again
    mha::load_state_dict(*loaded.c.module, loaded.float_weights(2.0));
    EXPECT_FALSE(bitwise_equal(loaded.output(), saved.output()));
    mha::load_state_dict(*loaded.c.module, path);
    EXPECT_TRUE(bitwise_equal(loaded.output(), saved.output())) << extension;
    EXPECT_TRUE(same_state(module_state(*loaded.c.module), module_state(*saved.c.module)));
    std::remove(path.c_str());
  }
}

TEST(Int8SaveLoad, FloatWeightsLoadedIntoAQuantizedModuleAreQuantized) {
  QuantizedLayer quantized;  // quantized from the reference's float weights
  QuantizedLayer reloaded;
  mha::load_state_dict(*reloaded.c.module, reloaded.float_weights(2.0));
  mha::load_state_dict(*reloaded.c.module, reloaded.float_weights(1.0));
  EXPECT_TRUE(same_state(module_state(*reloaded.c.module), module_state(*quantized.c.module)));
  EXPECT_TRUE(bitwise_equal(reloaded.output(), quantized.output()));
}

TEST(Int8SaveLoad, BadInt8StateIsAnErrorAndChangesNothing) {
  QuantizedLayer layer;
  const auto before = module_state(*layer.c.module);
  auto state = before;
  state.erase("linear1.weight_scale");
  MHA_ASSERT_THROWS_WITH(mha::load_state_dict(*layer.c.module, state),
                         "linear1.weight is int8 but the state_dict has no linear1.weight_scale");
  state = before;
  state["linear1.weight_scale"] = torch::ones({3}, torch::kDouble);
  MHA_ASSERT_THROWS_WITH(mha::load_state_dict(*layer.c.module, state),
                         "size mismatch for linear1.weight_scale");
  state = before;
  state["linear1.weight"] = state["linear1.weight"].to(torch::kInt);
  MHA_ASSERT_THROWS_WITH(mha::load_state_dict(*layer.c.module, state),
                         "cannot load linear1.weight from Int");
  EXPECT_TRUE(same_state(module_state(*layer.c.module), before));
}

TEST(Int8SaveLoad, Int8StateIntoAFloatModuleIsAnError) {
  QuantizedLayer quantized;
  Int8Case float_layer = load_case("EncoderLayer");
  const auto before = module_state(*float_layer.module);
  MHA_ASSERT_THROWS_WITH(
      mha::load_state_dict(*float_layer.module, module_state(*quantized.c.module),
                           mha::LoadOptions().strict(false)),
      "quantize this module first (mha::quantize_dynamic), then load");
  EXPECT_TRUE(same_state(module_state(*float_layer.module), before));
}

TEST(Int8Errors, TrainingAutogradAndOtherInputsAreErrors) {
  QuantizedLayer layer;
  const Tensor x = layer.c.input("query");
  layer.c.module->train();
  MHA_ASSERT_THROWS_WITH(layer.output(), "compute in eval mode only: call eval()");
  layer.c.module->eval();
  auto attn =
      std::dynamic_pointer_cast<mha::TransformerEncoderLayerImpl>(layer.c.module)->self_attn;
  const Tensor needs_grad = x.clone().requires_grad_(true);
  MHA_ASSERT_THROWS_WITH(attn(needs_grad, needs_grad, needs_grad), "have no autograd");
  const Tensor as_double = x.to(torch::kDouble);
  torch::NoGradGuard no_grad;
  MHA_ASSERT_THROWS_WITH(attn(as_double, as_double, as_double), "");
}

TEST(Int8Errors, ToAnotherDtypeThrowsAndChangesNothing) {
  QuantizedLayer layer;
  const auto before = module_state(*layer.c.module);
  MHA_ASSERT_THROWS_WITH(layer.c.module->to(torch::kDouble),
                         "to(Double): this module holds int8 (mha::quantize_dynamic) weights");
  EXPECT_TRUE(same_state(module_state(*layer.c.module), before));
  layer.c.module->to(torch::kFloat);  // nothing to convert
  layer.c.module->to(torch::kCPU);
  EXPECT_TRUE(same_state(module_state(*layer.c.module), before));
}

TEST(Int8Errors, QuantizingOtherWeightsIsAnErrorAndChangesNothing) {
  Int8Case c = load_case("EncoderLayer");
  c.module->to(torch::kDouble);
  const auto before = module_state(*c.module);
  MHA_ASSERT_THROWS_WITH(mha::quantize_dynamic(*c.module),
                         "self_attn.in_proj_weight: expected a 2-D float32 CPU weight, but got "
                         "Double");
  EXPECT_FALSE(mha::is_quantized(*c.module));
  EXPECT_TRUE(same_state(module_state(*c.module), before));
}

TEST(Int8Errors, WithoutFbgemmQuantizingIsAnErrorAndChangesNothing) {
  // A LibTorch without the ops: the look-up reports it.
  const mha::detail::Int8GemmOps missing("no_such::prepack", "no_such::dynamic", "no_such::unpack");
  EXPECT_NE(missing.unavailable_reason().find("does not register FBGEMM's"), std::string::npos);
  // An engine that does not pack for FBGEMM (qnnpack on ARM; onednn when chosen).
  const at::QEngine engine = at::globalContext().qEngine();
  at::globalContext().setQEngine(at::QEngine::ONEDNN);
  Int8Case c = load_case("EncoderLayer");
  const auto before = module_state(*c.module);
  bool thrown = false;
  try {
    mha::quantize_dynamic(*c.module);
  } catch (const c10::Error& e) {
    thrown =
        std::string(e.what_without_backtrace()).find("expected x86 or fbgemm") != std::string::npos;
  }
  at::globalContext().setQEngine(engine);
  EXPECT_TRUE(thrown);
  EXPECT_TRUE(same_state(module_state(*c.module), before));
}

TEST(Int8Linear, LibTorchsForwardRaisesAndMhaLinearComputes) {
  Int8Case c = load_case("LinearPerChannel");
  auto linear = std::dynamic_pointer_cast<torch::nn::LinearImpl>(c.module);
  mha::quantize_dynamic(*linear);
  EXPECT_EQ(linear->weight.numel(), 0);
  EXPECT_EQ(linear->parameters().size(), 2u);  // the empty weight and the bias
  torch::NoGradGuard no_grad;
  MHA_ASSERT_THROWS_WITH(linear->forward(c.input("query")), "");
  EXPECT_TRUE(bitwise_equal(mha::linear(*linear, c.input("query")), c.file.at("expected.output")));
  mha::quantize_dynamic(*linear);  // already converted: nothing changes
  EXPECT_TRUE(bitwise_equal(mha::linear(*linear, c.input("query")), c.file.at("expected.output")));
  std::ostringstream printed;
  printed << *linear;
  EXPECT_NE(printed.str().find("mha::Int8Weight(out_features=40, in_features=32"),
            std::string::npos)
      << printed.str();
}

TEST(Int8Linear, TheDirectCallIsTheBoxedOpBitwise) {
  // The GEMM calls the packed object (no dispatcher); the boxed op is the
  // fallback where the packed value is of another class. At a served size
  // (2048 x 512, M = 1, 8, 48: FBGEMM's packed kernels), both recipes.
  using mha::detail::Int8GemmOps;
  const Int8GemmOps boxed("quantized::linear_prepack", "quantized::linear_dynamic",
                          "quantized::linear_unpack", /*call_directly=*/false);
  torch::manual_seed(0);
  const Tensor weight = torch::randn({2048, 512}) / 512;
  for (const auto recipe :
       {mha::QuantizeRecipe::kPerChannel, mha::QuantizeRecipe::kTorchAoDefault}) {
    const mha::detail::Int8Values values = mha::detail::quantize_weight(weight, recipe);
    mha::detail::Int8WeightImpl direct(values, recipe, {2048});
    mha::detail::Int8WeightImpl fallback(values, recipe, {512, 1536}, boxed);
    direct.eval();
    fallback.eval();
    for (const int64_t m : {1, 8, 48}) {
      const Tensor x = torch::randn({m, 512});
      EXPECT_TRUE(bitwise_equal(direct.forward(x, {}), fallback.forward(x, {}))) << m;
    }
  }
  const Tensor qweight = at::quantize_per_tensor(weight, 0.01, 0, at::kQInt8);
  EXPECT_TRUE(Int8GemmOps::fbgemm().pack(qweight).direct);  // this LibTorch's class
  EXPECT_FALSE(boxed.pack(qweight).direct);
}

TEST(Int8Decoding, CachedDecodingOfAQuantizedDecoderMatchesItsForward) {
  // A prompt of the whole target at once: the cached call's projections see
  // the rows the plain forward sees (the activations' scales are per call), so
  // only float32 rounding differs (SDPA on the cache vs Python's steps).
  Int8Case c = load_case("DecoderLayer");
  mha::TransformerDecoder decoder(
      mha::TransformerDecoderOptions(mha::TransformerDecoderLayer(layer_options(c)), 1));
  const auto into_layer = mha::KeyMap().add(
      [](const std::string& key) -> std::optional<std::string> { return "layers.0." + key; });
  mha::load_state_dict(decoder, c.file, mha::LoadOptions().prefix("model.").key_map(into_layer));
  decoder->eval();
  mha::quantize_dynamic(decoder);
  torch::NoGradGuard no_grad;
  const Tensor tgt = c.input("query"), memory = c.input("memory");
  const Tensor causal = mha::TransformerImpl::generate_square_subsequent_mask(tgt.size(0));
  const Tensor expected = decoder->forward(tgt, memory, causal);
  auto cache = decoder->make_cache();
  const Tensor cached = decoder->forward_cached(tgt, memory, cache);
  EXPECT_TRUE(mha::test::tensors_close(cached, expected, 1e-5, 1e-5));
  // One more position: the cache grows; its step is a call of one row.
  const Tensor next = torch::randn({1, tgt.size(1), tgt.size(2)});
  EXPECT_EQ(decoder->forward_cached(next, {}, cache).sizes(), next.sizes());
}

TEST(Int8Cuda, QuantizingACudaModuleIsAnError) {
  MHA_SKIP_WITHOUT_CUDA();
  mha::MultiheadAttention attn(16, 2);
  attn->to(torch::kCUDA);
  MHA_ASSERT_THROWS_WITH(mha::quantize_dynamic(attn), "expected a 2-D float32 CPU weight");
  EXPECT_FALSE(mha::is_quantized(*attn));
}

}  // namespace
