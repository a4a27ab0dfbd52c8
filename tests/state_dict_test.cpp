// Weights: read_state_dict, load_state_dict, save_state_dict against files
// written by the installed torch (scripts/export_test_checkpoints.py, run by
// CTest as the fixture state_dict_checkpoints), round trips through Python,
// and mutated files. The loaders' bad-input cases are rows of
// bad_input_table_test.cpp.

#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <mha/multihead_attention.h>
#include <mha/state_dict.h>
#include <mha/transformer.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "module_state.h"
#include "support.h"
#include "weights_files.h"

namespace mha {
namespace {

using test::fixture;
using test::read_bytes;
using test::scratch_dir;
using test::tensors_close;
using test::torch_archive;
using test::u64;
using test::write_bytes;
using torch::Tensor;

constexpr int64_t E = 16, H = 4;  // as in export_test_checkpoints.py

// ~~~ helpers ~~~

/// A file of this test's own in the scratch directory.
std::string scratch(const std::string& name) {
  return scratch_dir(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "/" + name;
}

std::map<std::string, Tensor> snapshot(const torch::nn::Module& module) {
  const auto state = mha::support::snapshot(module);
  return {state.begin(), state.end()};
}

void expect_same_tensors(const std::map<std::string, Tensor>& actual,
                         const std::map<std::string, Tensor>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, tensor] : expected) {
    ASSERT_TRUE(actual.count(name)) << name;
    EXPECT_EQ(actual.at(name).scalar_type(), tensor.scalar_type()) << name;
    EXPECT_TRUE(test::bitwise_equal(actual.at(name), tensor)) << name;
  }
}

void expect_close(const Tensor& actual, const Tensor& expected) {
  EXPECT_TRUE(tensors_close(actual, expected, 1.3e-6, 1e-5));
}

/// Runs `module` on the inputs of an `.io.safetensors` file and compares with
/// Python's output (and weights when the file has them).
void expect_forward_matches(MultiheadAttention& module, const std::string& io_name) {
  const auto io = read_state_dict(fixture(io_name));
  const Tensor mask = io.count("attn_mask") ? io.at("attn_mask") : Tensor();
  module->eval();
  const bool weights = io.count("weights") > 0;
  auto [output, attn] = module->forward(io.at("query"), io.at("key"), io.at("value"), {},
                                        /*need_weights=*/weights, mask);
  expect_close(output, io.at("output"));
  if (weights) {
    expect_close(attn, io.at("weights"));
  }
}

// ~~~ real models saved whole in Python, loaded by prefix ~~~

struct StateDictModelsTest : test::SeedingFixture {};

TEST_F(StateDictModelsTest, TransformerEncoderLayerSelfAttn) {
  MultiheadAttention attn(E, H);
  const auto result =
      load_state_dict(*attn, fixture("encoder_layer.pt"), LoadOptions().prefix("self_attn."));
  EXPECT_TRUE(result.missing_keys.empty());
  EXPECT_TRUE(result.unexpected_keys.empty());
  expect_forward_matches(attn, "encoder_layer.io.safetensors");
}

TEST_F(StateDictModelsTest, TransformerDecoderLayerSelfAndCrossAttention) {
  MultiheadAttention self_attn(MultiheadAttentionOptions(E, H).batch_first(true));
  MultiheadAttention cross_attn(MultiheadAttentionOptions(E, H).batch_first(true));
  load_state_dict(*self_attn, fixture("decoder_layer.pt"), LoadOptions().prefix("self_attn."));
  load_state_dict(*cross_attn, fixture("decoder_layer.pt"),
                  LoadOptions().prefix("multihead_attn."));
  expect_forward_matches(self_attn, "decoder_layer.self_attn.io.safetensors");
  expect_forward_matches(cross_attn, "decoder_layer.multihead_attn.io.safetensors");
}

TEST_F(StateDictModelsTest, TransformerDeepPrefix) {
  MultiheadAttention attn(E, H);
  load_state_dict(*attn, fixture("transformer.pt"),
                  LoadOptions().prefix("decoder.layers.1.multihead_attn."));
  expect_forward_matches(attn, "transformer.decoder.layers.1.multihead_attn.io.safetensors");
}

TEST_F(StateDictModelsTest, VitBlockWithKeyMap) {
  MultiheadAttention attn(MultiheadAttentionOptions(E, H).batch_first(true));
  load_state_dict(*attn, fixture("vit_block.pt"),
                  LoadOptions().prefix("attn.").key_map(KeyMap::vit()));
  expect_forward_matches(attn, "vit_block.attn.io.safetensors");
}

TEST_F(StateDictModelsTest, VitBlockWithoutKeyMapReportsTimmNames) {
  MultiheadAttention attn(MultiheadAttentionOptions(E, H).batch_first(true));
  MHA_ASSERT_THROWS_WITH(
      load_state_dict(*attn, fixture("vit_block.pt"), LoadOptions().prefix("attn.")),
      "Unexpected key(s) in state_dict: \"proj.bias\", \"proj.weight\", \"qkv.bias\", "
      "\"qkv.weight\".");
  MHA_ASSERT_THROWS_WITH(
      load_state_dict(*attn, fixture("vit_block.pt"), LoadOptions().prefix("attn.")),
      "hint: the attention at 'attn.' has timm's qkv/proj names: load it with "
      "LoadOptions().key_map(mha::KeyMap::vit())");
}

// A C++ twin of export_test_checkpoints.py's TinyViT, attention only.
struct PatchEmbedImpl : torch::nn::Module {
  PatchEmbedImpl() { proj = register_module("proj", torch::nn::Linear(3, E)); }
  torch::nn::Linear proj{nullptr};
};
TORCH_MODULE(PatchEmbed);

struct VitBlockImpl : torch::nn::Module {
  VitBlockImpl() {
    attn = register_module("attn",
                           MultiheadAttention(MultiheadAttentionOptions(E, H).batch_first(true)));
  }
  MultiheadAttention attn{nullptr};
};
TORCH_MODULE(VitBlock);

TEST_F(StateDictModelsTest, WholeTinyVitWithKeyMapLeavesPatchEmbedProjAlone) {
  torch::nn::Module vit;
  auto patch_embed = vit.register_module("patch_embed", PatchEmbed());
  torch::nn::ModuleList blocks{VitBlock(), VitBlock()};
  vit.register_module("blocks", blocks);
  const auto result = load_state_dict(vit, fixture("tiny_vit.pt"),
                                      LoadOptions().strict(false).key_map(KeyMap::vit()));
  EXPECT_TRUE(result.missing_keys.empty()) << result.missing_keys.front();
  for (const auto& key : result.unexpected_keys) {
    EXPECT_TRUE(key.find(".norm") != std::string::npos || key.find(".mlp.") != std::string::npos)
        << key;
  }
  EXPECT_EQ(result.unexpected_keys.size(), 2u * 8u);  // norm1, norm2, fc1, fc2: weight and bias
  const auto file = read_state_dict(fixture("tiny_vit.pt"));
  EXPECT_TRUE(test::bitwise_equal(patch_embed->proj->weight, file.at("patch_embed.proj.weight")));
  auto attn = blocks[1]->as<VitBlockImpl>()->attn;
  expect_forward_matches(attn, "tiny_vit.blocks.1.attn.io.safetensors");
}

// The small C++ model of the issue: two MultiheadAttention and a Linear.
struct SmallImpl : torch::nn::Module {
  SmallImpl()
      : attn1(register_module("attn1", MultiheadAttention(E, H))),
        attn2(register_module(
            "attn2",
            MultiheadAttention(MultiheadAttentionOptions(E, 2).kdim(6).vdim(3).add_bias_kv(true)))),
        head(register_module("head", torch::nn::Linear(E, 3))) {}
  Tensor forward(const Tensor& x, const Tensor& memory_k, const Tensor& memory_v) {
    auto y = std::get<0>(attn1(x, x, x));
    y = std::get<0>(attn2(y, memory_k, memory_v));
    return head(y);
  }
  MultiheadAttention attn1, attn2;
  torch::nn::Linear head;
};
TORCH_MODULE(Small);

TEST_F(StateDictModelsTest, SmallModelWithTwoAttentionsAndALinear) {
  Small small;
  const auto result = load_state_dict(*small, fixture("small.pt"));
  EXPECT_TRUE(result.missing_keys.empty());
  EXPECT_TRUE(result.unexpected_keys.empty());
  small->eval();
  const auto io = read_state_dict(fixture("small.io.safetensors"));
  expect_close(small->forward(io.at("x"), io.at("memory_k"), io.at("memory_v")), io.at("output"));
}

TEST_F(StateDictModelsTest, StateDictNamesAndOrderAreThoseOfPython) {
  Small small;
  std::vector<std::string> names;
  for (const auto& item : state_dict(*small)) {
    names.push_back(item.first);
  }
  // Python: list(Small().state_dict()) in export_test_checkpoints.py.
  const std::vector<std::string> python{"attn1.in_proj_weight",  "attn1.in_proj_bias",
                                        "attn1.out_proj.weight", "attn1.out_proj.bias",
                                        "attn2.q_proj_weight",   "attn2.k_proj_weight",
                                        "attn2.v_proj_weight",   "attn2.in_proj_bias",
                                        "attn2.bias_k",          "attn2.bias_v",
                                        "attn2.out_proj.weight", "attn2.out_proj.bias",
                                        "head.weight",           "head.bias"};
  EXPECT_EQ(names, python);
  std::vector<std::string> file_names;
  for (const auto& item : read_state_dict(fixture("small.pt"))) {
    file_names.push_back(item.first);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, file_names);
}

// ~~~ formats ~~~

struct StateDictFormatsTest : test::SeedingFixture {};

TEST_F(StateDictFormatsTest, TorchSaveSafetensorsAndTorchScriptAgree) {
  const auto pt = read_state_dict(fixture("encoder_layer.pt"));
  EXPECT_EQ(pt.size(), 12u);
  expect_same_tensors(read_state_dict(fixture("encoder_layer.safetensors")), pt);
  expect_same_tensors(read_state_dict(fixture("encoder_layer.torchscript.pt")), pt);
}

TEST_F(StateDictFormatsTest, TorchScriptLoadsByPrefix) {
  MultiheadAttention attn(E, H);
  load_state_dict(*attn, fixture("encoder_layer.torchscript.pt"),
                  LoadOptions().prefix("self_attn."));
  expect_forward_matches(attn, "encoder_layer.io.safetensors");
}

/// (arange(n) / 8 + start) in `dtype`, as export_test_checkpoints.py's patterned().
Tensor patterned(std::vector<int64_t> shape, torch::Dtype dtype) {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return (torch::arange(n, torch::kFloat64).reshape(shape) / 8).to(dtype);
}

void expect_dtypes_file(const std::string& name) {
  SCOPED_TRACE(name);
  const auto sd = read_state_dict(fixture(name));
  const std::map<std::string, Tensor> expected{
      {"f32.weight", patterned({3, 4}, torch::kFloat32)},
      {"f64.weight", patterned({3, 4}, torch::kFloat64)},
      {"f16.weight", patterned({3, 4}, torch::kFloat16)},
      {"bf16.weight", patterned({3, 4}, torch::kBFloat16)},
      {"i64.buffer", torch::arange(5, torch::kInt64)},
      {"bool.mask", torch::tensor({true, false, true})},
      {"scalar", torch::tensor(2.5f)},
      {"empty", torch::zeros({0, 3})},
  };
  expect_same_tensors(sd, expected);
}

TEST_F(StateDictFormatsTest, EveryFloatingDtypeFromTorchSave) { expect_dtypes_file("dtypes.pt"); }

TEST_F(StateDictFormatsTest, EveryFloatingDtypeFromSafetensors) {
  expect_dtypes_file("dtypes.safetensors");
}

TEST_F(StateDictFormatsTest, TiedViewsShareOneStorage) {
  const auto sd = read_state_dict(fixture("tied.pt"));
  const auto base = patterned({4, 3}, torch::kFloat32);
  EXPECT_TRUE(test::bitwise_equal(sd.at("w"), base));
  EXPECT_TRUE(test::bitwise_equal(sd.at("rows"), base.slice(0, 1, 3)));
  EXPECT_TRUE(test::bitwise_equal(sd.at("t"), base.t()));
  EXPECT_EQ(sd.at("t").strides(), base.t().strides());
  EXPECT_TRUE(sd.at("w").is_alias_of(sd.at("rows")));
  EXPECT_TRUE(sd.at("w").is_alias_of(sd.at("t")));
}

TEST_F(StateDictFormatsTest, TensorsSavedFromCudaLoadToCpu) {
  const auto sd = read_state_dict(fixture("mha_from_cuda.pt"));
  for (const auto& [name, tensor] : sd) {
    EXPECT_TRUE(tensor.device().is_cpu()) << name;
  }
  expect_same_tensors(sd, read_state_dict(fixture("mha.pt")));
}

TEST_F(StateDictFormatsTest, OrderedDictMetadataIsIgnored) {
  const auto sd = read_state_dict(fixture("mha.pt"));
  std::vector<std::string> names;
  for (const auto& item : sd) names.push_back(item.first);
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_bias", "in_proj_weight", "out_proj.bias",
                                             "out_proj.weight"}));
}

TEST_F(StateDictFormatsTest, PlainDictNestedCheckpointAndParametersReadTheSame) {
  const auto reference = read_state_dict(fixture("mha.pt"));
  expect_same_tensors(read_state_dict(fixture("mha_plain_dict.pt")), reference);
  expect_same_tensors(read_state_dict(fixture("mha_parameters.pt")), reference);
  expect_same_tensors(read_state_dict(fixture("mha.safetensors")), reference);
  // {"model": state_dict, "epoch": 3, ...}: flattened, non-tensors skipped.
  MultiheadAttention attn(E, H);
  load_state_dict(*attn, fixture("mha_nested.pt"), LoadOptions().prefix("model."));
  expect_same_tensors(snapshot(*attn), reference);
}

TEST_F(StateDictFormatsTest, DtypesConvertLikeCopy) {
  auto half = read_state_dict(fixture("mha.pt"));
  for (auto& [name, tensor] : half) tensor = tensor.to(torch::kFloat16);
  MultiheadAttention attn(E, H);
  load_state_dict(*attn, half);
  EXPECT_EQ(attn->in_proj_weight.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(
      test::bitwise_equal(attn->in_proj_weight, half.at("in_proj_weight").to(torch::kFloat32)));
  attn->to(torch::kFloat64);
  load_state_dict(*attn, fixture("mha.pt"));
  EXPECT_EQ(attn->out_proj->weight.scalar_type(), torch::kFloat64);
  EXPECT_TRUE(test::bitwise_equal(
      attn->out_proj->weight,
      read_state_dict(fixture("mha.pt")).at("out_proj.weight").to(torch::kFloat64)));
}

// ~~~ load behaviour ~~~

struct StateDictLoadTest : test::SeedingFixture {};

TEST_F(StateDictLoadTest, StrictReportsAllProblemsAtOnceAndChangesNothing) {
  auto sd = read_state_dict(fixture("mha.pt"));
  sd.erase("in_proj_bias");
  sd["extra.weight"] = torch::zeros({2});
  sd["out_proj.weight"] = torch::zeros({3, 3});
  MultiheadAttention attn(E, H);
  const auto before = snapshot(*attn);
  try {
    load_state_dict(*attn, sd, {}, "mine.pt");
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    EXPECT_NE(message.find("mine.pt: error(s) in loading state_dict for mha::MultiheadAttention"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("Missing key(s) in state_dict: \"in_proj_bias\"."), std::string::npos)
        << message;
    EXPECT_NE(message.find("Unexpected key(s) in state_dict: \"extra.weight\"."), std::string::npos)
        << message;
    EXPECT_NE(message.find("size mismatch for out_proj.weight: copying a param with shape [3, 3] "
                           "from checkpoint, the shape in current model is [16, 16]."),
              std::string::npos)
        << message;
  }
  expect_same_tensors(snapshot(*attn), before);
}

TEST_F(StateDictLoadTest, NonStrictReturnsMissingAndUnexpectedKeys) {
  auto sd = read_state_dict(fixture("mha.pt"));
  sd.erase("in_proj_bias");
  sd["extra.weight"] = torch::zeros({2});
  MultiheadAttention attn(E, H);
  const auto result = load_state_dict(*attn, sd, LoadOptions().strict(false));
  EXPECT_EQ(result.missing_keys, std::vector<std::string>{"in_proj_bias"});
  EXPECT_EQ(result.unexpected_keys, std::vector<std::string>{"extra.weight"});
  EXPECT_TRUE(test::bitwise_equal(attn->in_proj_weight, sd.at("in_proj_weight")));
}

TEST_F(StateDictLoadTest, ShapeMismatchIsAnErrorEvenWhenNotStrict) {
  auto sd = read_state_dict(fixture("mha.pt"));
  sd["in_proj_bias"] = torch::zeros({5});
  MultiheadAttention attn(E, H);
  const auto before = snapshot(*attn);
  MHA_ASSERT_THROWS_WITH(load_state_dict(*attn, sd, LoadOptions().strict(false)),
                         "size mismatch for in_proj_bias");
  expect_same_tensors(snapshot(*attn), before);
}

TEST_F(StateDictLoadTest, PrefixWithoutTrailingDot) {
  MultiheadAttention attn(E, H);
  load_state_dict(*attn, fixture("encoder_layer.pt"), LoadOptions().prefix("self_attn"));
  expect_forward_matches(attn, "encoder_layer.io.safetensors");
}

TEST_F(StateDictLoadTest, KeyMapRules) {
  auto map = KeyMap().rename("a", "b").rename_suffix("x.w", "y.v");
  EXPECT_EQ(map.apply("a"), "b");
  EXPECT_EQ(map.apply("c.a"), "c.a");  // rename is exact
  EXPECT_EQ(map.apply("x.w"), "y.v");
  EXPECT_EQ(map.apply("m.x.w"), "m.y.v");
  EXPECT_EQ(map.apply("mx.w"), "mx.w");  // only at a '.' boundary
  const auto vit = KeyMap::vit();
  EXPECT_EQ(vit.apply("qkv.weight"), "in_proj_weight");
  EXPECT_EQ(vit.apply("proj.bias"), "out_proj.bias");
  EXPECT_EQ(vit.apply("blocks.3.attn.qkv.bias"), "blocks.3.attn.in_proj_bias");
  EXPECT_EQ(vit.apply("blocks.3.attn.proj.weight"), "blocks.3.attn.out_proj.weight");
  EXPECT_EQ(vit.apply("patch_embed.proj.weight"), "patch_embed.proj.weight");
  EXPECT_TRUE(KeyMap().empty());
}

TEST_F(StateDictLoadTest, ModuleHoldersLoadAndSaveLikeTheirModules) {
  MultiheadAttention attn(E, H);
  load_state_dict(attn, fixture("encoder_layer.pt"), LoadOptions().prefix("self_attn."));
  expect_forward_matches(attn, "encoder_layer.io.safetensors");
  MultiheadAttention from_memory(E, H);
  load_state_dict(from_memory, read_state_dict(fixture("mha.pt")), {}, "mha.pt");
  expect_same_tensors(snapshot(*from_memory), read_state_dict(fixture("mha.pt")));
  EXPECT_EQ(state_dict(attn).size(), 4u);
  save_state_dict(attn, scratch("attn.safetensors"));
  expect_same_tensors(read_state_dict(scratch("attn.safetensors")), snapshot(*attn));
  // The Transformer classes, from Python's nn.TransformerEncoderLayer and nn.Transformer.
  TransformerEncoderLayer layer(TransformerLayerOptions(E, H).dim_feedforward(32));
  load_state_dict(layer, fixture("encoder_layer.pt"));
  expect_same_tensors(snapshot(*layer), read_state_dict(fixture("encoder_layer.pt")));
  Transformer model(TransformerOptions(E, H, 1, 2).dim_feedforward(32));
  load_state_dict(model, fixture("transformer.pt"));
  save_state_dict(model, scratch("transformer.pt"));
  expect_same_tensors(read_state_dict(scratch("transformer.pt")),
                      read_state_dict(fixture("transformer.pt")));
}

TEST_F(StateDictLoadTest, AnEmptyHolderIsAValueError) {
  MultiheadAttention empty{nullptr};
  EXPECT_THROW(load_state_dict(empty, fixture("mha.pt")), c10::ValueError);
  MHA_ASSERT_THROWS_WITH(
      load_state_dict(empty, fixture("mha.pt")),
      fixture("mha.pt") + ": expected module to hold a module, but got an empty holder (nullptr)");
  MHA_ASSERT_THROWS_WITH(load_state_dict(empty, read_state_dict(fixture("mha.pt")), {}, "in.pt"),
                         "in.pt: expected module to hold a module");
  MHA_ASSERT_THROWS_WITH(save_state_dict(empty, scratch("empty.pt")),
                         "empty.pt: expected module to hold a module");
  MHA_ASSERT_THROWS_WITH(state_dict(empty), "expected module to hold a module");
}

TEST_F(StateDictLoadTest, TwoKeysRenamedToOneNameIsAnError) {
  std::map<std::string, Tensor> sd{{"a", torch::zeros({1})}, {"b", torch::zeros({1})}};
  MultiheadAttention attn(E, H);
  MHA_ASSERT_THROWS_WITH(
      load_state_dict(*attn, sd, LoadOptions().key_map(KeyMap().rename("a", "b")), "two.pt"),
      "two.pt: keys 'a' and 'b' both map to 'b'");
}

// ~~~ round trips ~~~

struct StateDictRoundTripTest : test::SeedingFixture {};

TEST_F(StateDictRoundTripTest, CppSaveCppLoad) {
  Small small;
  small->attn2->bias_k.data().fill_(0.5);
  for (const std::string ext : {".pt", ".safetensors"}) {
    const auto path = scratch("small" + ext);
    save_state_dict(*small, path);
    Small other;
    load_state_dict(*other, path);
    expect_same_tensors(snapshot(*other), snapshot(*small));
  }
}

TEST_F(StateDictRoundTripTest, CppSavePythonLoadPythonSaveCppLoad) {
  torch::nn::Module model;
  model.register_module("attn", MultiheadAttention(E, H));
  model.register_buffer("steps", torch::arange(3, torch::kInt64));
  model.register_buffer("half", torch::randn({2, 3}).to(torch::kFloat16));
  model.register_parameter("bf16", torch::randn({4}).to(torch::kBFloat16));
  model.register_parameter("f64", torch::randn({2, 2}, torch::kFloat64).t());  // non-contiguous
  const auto cpp_pt = scratch("cpp.pt"), cpp_st = scratch("cpp.safetensors");
  const auto py_pt = scratch("python.pt"), py_st = scratch("python.safetensors");
  save_state_dict(model, cpp_pt);
  save_state_dict(model, cpp_st);
  const std::string command = std::string("\"") + MHA_PYTHON + "\" \"" +
                              MHA_EXPORT_TEST_CHECKPOINTS + "\" --roundtrip \"" + cpp_pt + "\" \"" +
                              cpp_st + "\" \"" + py_pt + "\" \"" + py_st + "\"";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const auto expected = snapshot(model);
  expect_same_tensors(read_state_dict(py_pt), expected);
  expect_same_tensors(read_state_dict(py_st), expected);
}

TEST_F(StateDictRoundTripTest, SaveRejectsAnUnknownExtension) {
  MultiheadAttention attn(E, H);
  const auto path = scratch("weights.npz");
  MHA_ASSERT_THROWS_WITH(save_state_dict(*attn, path), path + ": cannot tell the format");
}

TEST_F(StateDictRoundTripTest, SaveToAnUnwritablePathFails) {
  MultiheadAttention attn(E, H);
  const auto path = scratch("no_such_dir") + "/weights.safetensors";
  MHA_ASSERT_THROWS_WITH(save_state_dict(*attn, path), path + ": cannot be opened for writing");
  MHA_ASSERT_THROWS_WITH(save_state_dict(*attn, scratch("no_such_dir") + "/w.pt"),
                         "cannot write the archive");
}

// ~~~ mutations: whatever the bytes, an error or a result, never a crash ~~~

/// Iterations per fuzz test: MHA_FUZZ_ITERATIONS, default 300 (time: bench/results/history.md).
int fuzz_iterations() {
  const char* env = std::getenv("MHA_FUZZ_ITERATIONS");
  return env ? std::max(1, std::atoi(env)) : 300;
}

/// Flips, overwrites, inserts, deletes or truncates a few bytes.
std::string mutate(std::string bytes, std::mt19937& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !bytes.empty(); ++e) {
    const size_t at = rng() % bytes.size();
    switch (rng() % 5) {
      case 0:
        bytes[at] = static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
        break;
      case 1:
        bytes[at] = static_cast<char>(rng());
        break;
      case 2:
        bytes.insert(at, 1, static_cast<char>(rng()));
        break;
      case 3:
        bytes.erase(at, 1 + rng() % 8);
        break;
      default:
        bytes.resize(at);
    }
  }
  return bytes;
}

/// Reads `bytes` as a weights file; returns whether it was accepted. Only
/// c10::Error may escape read_state_dict.
bool try_read(const std::string& path, const std::string& bytes) {
  write_bytes(path, bytes);
  try {
    read_state_dict(path);
    return true;
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    EXPECT_EQ(message.rfind(path, 0), 0u) << "error does not start with the file: " << message;
    return false;
  }
}

struct StateDictFuzzTest : test::SeedingFixture {};

TEST_F(StateDictFuzzTest, MutatedTorchSavePickles) {
  // Mutate data.pkl of a real state_dict and re-archive it with its storages.
  caffe2::serialize::PyTorchStreamReader reader(fixture("encoder_layer.pt"));
  const auto [data, size] = reader.getRecord("data.pkl");
  const std::string pickle(static_cast<const char*>(data.get()), size);
  std::map<std::string, std::string> records;
  for (const auto& name : reader.getAllRecords()) {
    if (name.rfind("data/", 0) == 0) {
      const auto [bytes, n] = reader.getRecord(name);
      records[name.substr(5)] = std::string(static_cast<const char*>(bytes.get()), n);
    }
  }
  std::mt19937 rng(1234);
  int accepted = 0;
  const int n = fuzz_iterations();
  for (int i = 0; i < n; ++i) {
    const auto path = torch_archive(scratch("mutated.pt"), mutate(pickle, rng), records);
    MultiheadAttention attn(E, H);
    const auto before = mha::support::snapshot(*attn);
    try {
      load_state_dict(*attn, path, LoadOptions().prefix("self_attn.").strict(false));
      ++accepted;
    } catch (const c10::Error& e) {
      // Only a c10::Error that names the file may escape, and the module stays as it was.
      const std::string message = e.what_without_backtrace();
      EXPECT_EQ(message.rfind(path, 0), 0u) << "mutation " << i << ": " << message;
      const auto difference = mha::support::state_difference(mha::support::snapshot(*attn), before);
      ASSERT_TRUE(difference.empty()) << "mutation " << i << " changed the module: " << difference;
    }
  }
  RecordProperty("accepted", accepted);
}

TEST_F(StateDictFuzzTest, MutatedTorchSaveFiles) {
  const auto original = read_bytes(fixture("mha.pt"));
  std::mt19937 rng(99);
  const int n = fuzz_iterations();
  for (int i = 0; i < n; ++i) {
    try_read(scratch("mutated.pt"), mutate(original, rng));
  }
}

TEST_F(StateDictFuzzTest, MutatedSafetensorsFiles) {
  const auto original = read_bytes(fixture("dtypes.safetensors"));
  const uint64_t header = *reinterpret_cast<const uint64_t*>(original.data());
  std::mt19937 rng(7);
  const int n = fuzz_iterations();
  for (int i = 0; i < n; ++i) {
    // Mostly the header, where the parsing is.
    auto bytes = original;
    if (rng() % 4 != 0) {
      auto head = mutate(original.substr(8, header), rng);
      bytes = u64(rng() % 8 == 0 ? header : head.size()) + head + original.substr(8 + header);
    } else {
      bytes = mutate(original, rng);
    }
    try_read(scratch("mutated.safetensors"), bytes);
  }
}

}  // namespace
}  // namespace mha
