// Weights: read_state_dict, load_state_dict, save_state_dict against files
// written by the installed torch (scripts/export_test_checkpoints.py, run by
// CTest as the fixture state_dict_checkpoints), round trips through Python,
// and one test per kind of bad input.

#include <mha/multihead_attention.h>
#include <mha/state_dict.h>

#include "support.h"

#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
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

namespace mha {
namespace {

namespace fs = std::filesystem;
using test::tensors_close;
using torch::Tensor;

constexpr int64_t E = 16, H = 4;  // as in export_test_checkpoints.py

// ~~~ helpers ~~~

std::string fixture(const std::string& name) {
  const std::string path = std::string(MHA_STATE_DICT_FIXTURES) + "/" + name;
  if (!fs::exists(path)) {
    ADD_FAILURE() << path << " is missing; run the CTest fixture (ctest -R state_dict) or "
                  << "python scripts/export_test_checkpoints.py --out " << MHA_STATE_DICT_FIXTURES;
  }
  return path;
}

/// A file of this test's own in the scratch directory.
std::string scratch(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::path(MHA_STATE_DICT_FIXTURES) / "scratch" / info->name();
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  return path;
}

/// A little-endian u64, as the safetensors size field.
std::string u64(uint64_t value) {
  return std::string(reinterpret_cast<const char*>(&value), 8);
}

std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return u64(header.size()) + header + data;
}

/// A torch.save-style archive with `pickle` as data.pkl and `records` as data/<key>.
std::string torch_archive(const std::string& path,
                          const std::string& pickle,
                          const std::map<std::string, std::string>& records = {}) {
  caffe2::serialize::PyTorchStreamWriter writer(path);
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  writer.writeRecord("byteorder", "little", 6);
  for (const auto& [key, bytes] : records) {
    writer.writeRecord("data/" + key, bytes.data(), bytes.size());
  }
  writer.writeEndOfFile();
  return path;
}

std::string binunicode(const std::string& s) {
  const auto n = static_cast<uint32_t>(s.size());
  return "X" + std::string(reinterpret_cast<const char*>(&n), 4) + s;
}

/// Pickle of {"a": tensor} where the tensor is a float32 view (offset, size,
/// stride) of storage '0' that claims `numel` elements.
std::string tensor_pickle(int numel, int offset, int size, int stride) {
  auto int1 = [](int v) { return std::string("K") + static_cast<char>(v); };
  return std::string("\x80\x02}") + binunicode("a") + "ctorch._utils\n_rebuild_tensor_v2\n((" +
         binunicode("storage") + "ctorch\nFloatStorage\n" + binunicode("0") + binunicode("cpu") +
         int1(numel) + "tQ" + int1(offset) + int1(size) + "\x85" + int1(stride) +
         "\x85\x89}tRs.";
}

std::map<std::string, Tensor> named(const std::vector<std::pair<std::string, Tensor>>& items) {
  return {items.begin(), items.end()};
}

std::map<std::string, Tensor> snapshot(const torch::nn::Module& module) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, tensor] : state_dict(module)) {
    out.emplace(name, tensor.clone());
  }
  return out;
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

/// Loading `path` into a fresh MultiheadAttention(E, H) throws a c10::Error that
/// names the file and contains `what`, and leaves the module unchanged.
void expect_load_fails(const std::string& path,
                       const std::string& what,
                       const LoadOptions& options = {}) {
  MultiheadAttention module(E, H);
  const auto before = snapshot(*module);
  try {
    load_state_dict(*module, path, options);
    ADD_FAILURE() << "loading " << path << " did not throw; expected: " << what;
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    EXPECT_NE(message.find(path), std::string::npos) << "message does not name the file: " << message;
    EXPECT_NE(message.find(what), std::string::npos) << "message: " << message << "\nexpected: " << what;
  }
  expect_same_tensors(snapshot(*module), before);
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
}

// A C++ twin of export_test_checkpoints.py's TinyViT, attention only.
struct PatchEmbedImpl : torch::nn::Module {
  PatchEmbedImpl() { proj = register_module("proj", torch::nn::Linear(3, E)); }
  torch::nn::Linear proj{nullptr};
};
TORCH_MODULE(PatchEmbed);

struct VitBlockImpl : torch::nn::Module {
  VitBlockImpl() {
    attn = register_module("attn", MultiheadAttention(MultiheadAttentionOptions(E, H).batch_first(true)));
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
  const std::vector<std::string> python{
      "attn1.in_proj_weight", "attn1.in_proj_bias",   "attn1.out_proj.weight",
      "attn1.out_proj.bias",  "attn2.q_proj_weight",  "attn2.k_proj_weight",
      "attn2.v_proj_weight",  "attn2.in_proj_bias",   "attn2.bias_k",
      "attn2.bias_v",         "attn2.out_proj.weight", "attn2.out_proj.bias",
      "head.weight",          "head.bias"};
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

TEST_F(StateDictFormatsTest, EveryFloatingDtypeFromTorchSave) {
  expect_dtypes_file("dtypes.pt");
}

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
  EXPECT_TRUE(test::bitwise_equal(attn->in_proj_weight, half.at("in_proj_weight").to(torch::kFloat32)));
  attn->to(torch::kFloat64);
  load_state_dict(*attn, fixture("mha.pt"));
  EXPECT_EQ(attn->out_proj->weight.scalar_type(), torch::kFloat64);
  EXPECT_TRUE(test::bitwise_equal(
      attn->out_proj->weight, read_state_dict(fixture("mha.pt")).at("out_proj.weight").to(torch::kFloat64)));
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
              std::string::npos) << message;
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
  EXPECT_EQ(map.apply("c.a"), "c.a");     // rename is exact
  EXPECT_EQ(map.apply("x.w"), "y.v");
  EXPECT_EQ(map.apply("m.x.w"), "m.y.v");
  EXPECT_EQ(map.apply("mx.w"), "mx.w");   // only at a '.' boundary
  const auto vit = KeyMap::vit();
  EXPECT_EQ(vit.apply("qkv.weight"), "in_proj_weight");
  EXPECT_EQ(vit.apply("proj.bias"), "out_proj.bias");
  EXPECT_EQ(vit.apply("blocks.3.attn.qkv.bias"), "blocks.3.attn.in_proj_bias");
  EXPECT_EQ(vit.apply("blocks.3.attn.proj.weight"), "blocks.3.attn.out_proj.weight");
  EXPECT_EQ(vit.apply("patch_embed.proj.weight"), "patch_embed.proj.weight");
  EXPECT_TRUE(KeyMap().empty());
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
                              MHA_EXPORT_TEST_CHECKPOINTS + "\" --roundtrip \"" + cpp_pt +
                              "\" \"" + cpp_st + "\" \"" + py_pt + "\" \"" + py_st + "\"";
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

// ~~~ bad input: one test per case; each error names the file, the module is unchanged ~~~

struct StateDictBadInputTest : test::SeedingFixture {};

TEST_F(StateDictBadInputTest, NonexistentPath) {
  expect_load_fails(scratch("missing.pt"), "no such file");
}

TEST_F(StateDictBadInputTest, Directory) {
  expect_load_fails(scratch(""), "is a directory");
}

TEST_F(StateDictBadInputTest, EmptyFile) {
  expect_load_fails(write_bytes(scratch("empty.pt"), ""), "empty file");
}

TEST_F(StateDictBadInputTest, WrongMagic) {
  expect_load_fails(write_bytes(scratch("text.pt"), "hello, these are not weights\n"),
                    "unrecognised weights format");
}

TEST_F(StateDictBadInputTest, LegacyTorchSaveFormat) {
  expect_load_fails(write_bytes(scratch("legacy.pt"), std::string("\x80\x02\x8a\x0a", 4) + "rest"),
                    "legacy torch.save format");
}

TEST_F(StateDictBadInputTest, TruncatedTorchSave) {
  const auto bytes = read_bytes(fixture("mha.pt"));
  expect_load_fails(write_bytes(scratch("truncated.pt"), bytes.substr(0, bytes.size() / 2)),
                    "not a readable zip archive");
}

TEST_F(StateDictBadInputTest, TruncatedTorchScript) {
  const auto bytes = read_bytes(fixture("encoder_layer.torchscript.pt"));
  expect_load_fails(write_bytes(scratch("truncated_script.pt"), bytes.substr(0, bytes.size() - 30)),
                    "not a readable zip archive");
}

TEST_F(StateDictBadInputTest, CorruptZipCentralDirectory) {
  auto bytes = read_bytes(fixture("mha.pt"));
  const auto at = bytes.rfind("PK\x01\x02");  // the last central directory entry
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 4, "XXXX");
  expect_load_fails(write_bytes(scratch("bad_central_directory.pt"), bytes),
                    "not a readable zip archive");
}

TEST_F(StateDictBadInputTest, CorruptZipEntryPickle) {
  auto bytes = read_bytes(fixture("mha.pt"));
  const auto at = bytes.find("\x80\x02" "ccollections\nOrderedDict");  // data.pkl, stored
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at + 2, 24, std::string(24, '\xff'));
  expect_load_fails(write_bytes(scratch("bad_pickle_entry.pt"), bytes), "malformed pickle");
}

TEST_F(StateDictBadInputTest, ZipWithoutDataPkl) {
  const auto path = scratch("no_data_pkl.zip");
  {
    caffe2::serialize::PyTorchStreamWriter writer(path);
    writer.writeRecord("other", "x", 1);
  }
  expect_load_fails(path, "zip archive without data.pkl");
}

TEST_F(StateDictBadInputTest, PickleTruncatedBeforeStop) {
  const auto pickle = tensor_pickle(4, 0, 4, 1);
  expect_load_fails(torch_archive(scratch("no_stop.pt"), pickle.substr(0, pickle.size() - 3),
                                  {{"0", std::string(16, '\0')}}),
                    "malformed pickle: truncated");
}

TEST_F(StateDictBadInputTest, PickleUnknownOpcode) {
  expect_load_fails(torch_archive(scratch("opcode.pt"), std::string("\x80\x02}\xf0.", 5)),
                    "unsupported opcode 0xf0");
}

TEST_F(StateDictBadInputTest, PickleOddSetItems) {
  // {MARK "k" SETITEMS}: a key without a value would make LibTorch read past its stack.
  expect_load_fails(torch_archive(scratch("odd.pt"), "\x80\x02}(" + binunicode("k") + "u."),
                    "SETITEMS at offset 10 with an odd item count");
}

TEST_F(StateDictBadInputTest, PickleMemoIndexSkipsAhead) {
  // LONG_BINPUT 0xffffffff would make LibTorch allocate 4G memo entries.
  expect_load_fails(torch_archive(scratch("memo.pt"), std::string("\x80\x02}r\xff\xff\xff\xff.", 9)),
                    "memo index 4294967295");
}

TEST_F(StateDictBadInputTest, PickleNestedTooDeep) {
  // 3000 nested empty tuples: (((...ttt
  expect_load_fails(torch_archive(scratch("deep.pt"), "\x80\x02" + std::string(3000, '(') +
                                                           std::string(3000, 't') + "."),
                    "nesting deeper than 1000 levels");
}

TEST_F(StateDictBadInputTest, PickleStackUnderflow) {
  expect_load_fails(torch_archive(scratch("underflow.pt"), "\x80\x02}R."),
                    "REDUCE at offset 3 needs 2 values");
}

TEST_F(StateDictBadInputTest, PickleNotADict) {
  expect_load_fails(torch_archive(scratch("list.pt"), "\x80\x02]."), "not a dict of tensors");
}

TEST_F(StateDictBadInputTest, StorageRecordShorterThanItsTensor) {
  expect_load_fails(torch_archive(scratch("short_storage.pt"), tensor_pickle(4, 0, 4, 1),
                                  {{"0", std::string(8, '\0')}}),
                    "tensor 'a': its storage claims 16 bytes but the archive record holds 8");
}

TEST_F(StateDictBadInputTest, StorageRecordMissing) {
  expect_load_fails(torch_archive(scratch("missing_storage.pt"), tensor_pickle(4, 0, 4, 1)),
                    "cannot unpickle data.pkl");
}

// LibTorch 2.13 rejects these views while unpickling; the reader's own check
// (torch_save_reader.cpp) catches them with versions that do not.
constexpr const char* kPastStorage = "storage only has 16 bytes";

TEST_F(StateDictBadInputTest, TensorViewPastItsStorage) {
  expect_load_fails(torch_archive(scratch("view_past_end.pt"), tensor_pickle(4, 2, 4, 1),
                                  {{"0", std::string(16, '\0')}}),
                    kPastStorage);
}

TEST_F(StateDictBadInputTest, TensorStrideReachesPastItsStorage) {
  expect_load_fails(torch_archive(scratch("stride_past_end.pt"), tensor_pickle(4, 0, 2, 100),
                                  {{"0", std::string(16, '\0')}}),
                    kPastStorage);
}

TEST_F(StateDictBadInputTest, SafetensorsTruncatedSizeField) {
  expect_load_fails(write_bytes(scratch("tiny.safetensors"), u64(2).substr(0, 5)),
                    "unrecognised weights format");
}

TEST_F(StateDictBadInputTest, SafetensorsHeaderPastEndOfFile) {
  expect_load_fails(write_bytes(scratch("header_past_end.safetensors"), u64(1000) + "{}"),
                    "header of 1000 bytes ends past the end of the file");
}

TEST_F(StateDictBadInputTest, SafetensorsHugeHeaderSize) {
  expect_load_fails(write_bytes(scratch("huge_header.safetensors"), u64(1ull << 62) + "{}"),
                    "exceeds the 100000000 byte limit");
}

TEST_F(StateDictBadInputTest, SafetensorsTruncatedData) {
  const auto bytes = read_bytes(fixture("mha.safetensors"));
  expect_load_fails(write_bytes(scratch("truncated.safetensors"), bytes.substr(0, bytes.size() - 4)),
                    "reach past the end of the data");
}

TEST_F(StateDictBadInputTest, SafetensorsInvalidJson) {
  expect_load_fails(
      write_bytes(scratch("json.safetensors"), safetensors_bytes("{\"a\": {\"dtype\": ", "")),
      "invalid safetensors header: [json.exception.parse_error");
}

TEST_F(StateDictBadInputTest, SafetensorsHeaderNotAnObjectEntry) {
  expect_load_fails(write_bytes(scratch("entry.safetensors"), safetensors_bytes("{\"a\": 3}", "")),
                    "tensor 'a' is number, expected an object");
}

TEST_F(StateDictBadInputTest, SafetensorsDuplicateKey) {
  const std::string entry = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  expect_load_fails(write_bytes(scratch("duplicate.safetensors"),
                                safetensors_bytes("{\"a\":" + entry + ",\"a\":" + entry + "}",
                                                  std::string(4, '\0'))),
                    "duplicate key 'a'");
}

TEST_F(StateDictBadInputTest, SafetensorsHostileNesting) {
  expect_load_fails(write_bytes(scratch("nesting.safetensors"),
                                safetensors_bytes("{\"a\":" + std::string(100000, '[') + "}", "")),
                    "nested deeper than 4 levels");
}

TEST_F(StateDictBadInputTest, SafetensorsMissingField) {
  expect_load_fails(write_bytes(scratch("field.safetensors"),
                                safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1]}})", "")),
                    "tensor 'a' has no 'data_offsets'");
}

TEST_F(StateDictBadInputTest, SafetensorsNegativeShape) {
  expect_load_fails(
      write_bytes(scratch("shape.safetensors"),
                  safetensors_bytes(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
                                    std::string(4, '\0'))),
      "tensor 'a' shape entry is -1, expected a non-negative integer");
}

TEST_F(StateDictBadInputTest, SafetensorsShapeOverflow) {
  expect_load_fails(
      write_bytes(scratch("overflow.safetensors"),
                  safetensors_bytes(
                      R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                      std::string(8, '\0'))),
      "shape [4294967296,4294967296] is too large");
}

TEST_F(StateDictBadInputTest, SafetensorsUnknownDtype) {
  expect_load_fails(
      write_bytes(scratch("dtype.safetensors"),
                  safetensors_bytes(R"({"a":{"dtype":"F12","shape":[1],"data_offsets":[0,4]}})",
                                    std::string(4, '\0'))),
      "tensor 'a' has unknown dtype 'F12'");
}

TEST_F(StateDictBadInputTest, SafetensorsOffsetsPastEnd) {
  expect_load_fails(
      write_bytes(scratch("offsets.safetensors"),
                  safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                    std::string(8, '\0'))),
      "tensor 'a': data_offsets [4, 12] reach past the end of the data (8 bytes after the header)");
}

TEST_F(StateDictBadInputTest, SafetensorsOffsetsEndBeforeBegin) {
  expect_load_fails(
      write_bytes(scratch("reversed.safetensors"),
                  safetensors_bytes(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})",
                                    std::string(4, '\0'))),
      "data_offsets [4, 0] end before they begin");
}

TEST_F(StateDictBadInputTest, SafetensorsSizeDisagreesWithShape) {
  expect_load_fails(
      write_bytes(scratch("size.safetensors"),
                  safetensors_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                                    std::string(8, '\0'))),
      "data_offsets [0, 8] hold 8 bytes, but shape [3] of dtype F32 needs 12");
}

TEST_F(StateDictBadInputTest, SafetensorsOverlappingRanges) {
  expect_load_fails(
      write_bytes(scratch("overlap.safetensors"),
                  safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                    std::string(12, '\0'))),
      "tensors 'a' [0, 8] and 'b' [4, 12] overlap");
}

TEST_F(StateDictBadInputTest, SafetensorsGapBetweenRanges) {
  expect_load_fails(
      write_bytes(scratch("gap.safetensors"),
                  safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                    std::string(8, '\0'))),
      "tensor 'a' starts at 4, leaving bytes [0, 4) unused");
}

TEST_F(StateDictBadInputTest, SafetensorsBytesAfterTheLastTensor) {
  expect_load_fails(
      write_bytes(scratch("trailing.safetensors"),
                  safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                    std::string(6, '\0'))),
      "2 bytes after the last tensor's data");
}

TEST_F(StateDictBadInputTest, SafetensorsInvalidBool) {
  expect_load_fails(
      write_bytes(scratch("bool.safetensors"),
                  safetensors_bytes(R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})",
                                    std::string("\x01\x07", 2))),
      "tensor 'a' of dtype BOOL holds byte 7 at index 1");
}

TEST_F(StateDictBadInputTest, SafetensorsMetadataNotStrings) {
  expect_load_fails(write_bytes(scratch("metadata.safetensors"),
                                safetensors_bytes(R"({"__metadata__":{"format":1}})", "")),
                    "__metadata__ entry 'format' is 1, expected a string");
}

TEST_F(StateDictBadInputTest, PrefixMatchesNothing) {
  expect_load_fails(fixture("encoder_layer.pt"), "prefix 'decoder.' matches no key; the keys are",
                    LoadOptions().prefix("decoder"));
}

// ~~~ mutations: whatever the bytes, an error or a result, never a crash ~~~

/// Iterations per fuzz test: MHA_FUZZ_ITERATIONS, default 300 (about a second).
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
    try {
      load_state_dict(*attn, path, LoadOptions().prefix("self_attn.").strict(false));
      ++accepted;
    } catch (const c10::Error&) {
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
