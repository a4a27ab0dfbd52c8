// Training checkpoints and every Python container, scalar and dtype that
// torch.load(weights_only=True) reads: scripts/export_checkpoint_zoo.py (CTest
// fixture state_dict_checkpoints) writes each <name>.pt and, in <name>.json,
// the (dotted name, shape, dtype, FNV-1a 64 of the bytes) list and the skipped
// paths that a Python walk of torch.load's result finds with the naming rules
// of mha/state_dict.h; read_state_dict_with_report must return exactly those.

#include <gtest/gtest.h>
#include <mha/multihead_attention.h>
#include <mha/state_dict.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support.h"
#include "weights_files.h"

namespace mha {
namespace {

using nlohmann::json;

std::string zoo(const std::string& file) { return test::fixture("zoo/" + file); }

/// Python's name of a dtype (`str(torch.float32)`).
std::string python_dtype(c10::ScalarType dtype) {
  static const std::map<c10::ScalarType, std::string> names = {
      {c10::kHalf, "float16"},
      {c10::kBFloat16, "bfloat16"},
      {c10::kFloat, "float32"},
      {c10::kDouble, "float64"},
      {c10::kChar, "int8"},
      {c10::kShort, "int16"},
      {c10::kInt, "int32"},
      {c10::kLong, "int64"},
      {c10::kByte, "uint8"},
      {c10::kBool, "bool"},
      {c10::kComplexFloat, "complex64"},
      {c10::kComplexDouble, "complex128"},
      {c10::kUInt16, "uint16"},
      {c10::kUInt32, "uint32"},
      {c10::kUInt64, "uint64"},
      {c10::kFloat8_e4m3fn, "float8_e4m3fn"},
      {c10::kFloat8_e5m2, "float8_e5m2"}};
  const auto found = names.find(dtype);
  return "torch." + (found == names.end() ? std::string(c10::toString(dtype)) : found->second);
}

/// FNV-1a 64 of the tensor's contiguous bytes, as 16 hex digits (as in the script).
std::string fnv1a64(const torch::Tensor& tensor) {
  const auto contiguous = tensor.contiguous();
  const auto* bytes = static_cast<const uint8_t*>(contiguous.data_ptr());
  const size_t n = static_cast<size_t>(contiguous.numel()) * contiguous.element_size();
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

/// The .json list of `result`, in the script's form.
json describe(const ReadResult& result) {
  json tensors = json::array();
  for (const auto& [name, tensor] : result.tensors) {
    tensors.push_back(
        {name, tensor.sizes().vec(), python_dtype(tensor.scalar_type()), fnv1a64(tensor)});
  }
  auto skipped = result.skipped;
  std::sort(skipped.begin(), skipped.end());
  return {{"tensors", tensors}, {"skipped", skipped}};
}

void expect_as_python(const std::string& name) {
  const auto actual = describe(read_state_dict_with_report(zoo(name + ".pt")));
  std::ifstream in(zoo(name + ".json"));
  const json expected = json::parse(in);
  ASSERT_FALSE(expected.at("tensors").empty()) << name;
  EXPECT_EQ(actual.at("tensors"), expected.at("tensors"))
      << name << ": C++\n"
      << actual.at("tensors").dump() << "\nPython\n"
      << expected.at("tensors").dump();
  EXPECT_EQ(actual.at("skipped"), expected.at("skipped")) << name;
}

TEST(StateDictZooTest, TrainingCheckpointWithSgdMomentum) { expect_as_python("train_sgd"); }
TEST(StateDictZooTest, TrainingCheckpointWithAdam) { expect_as_python("train_adam"); }
TEST(StateDictZooTest, TrainingCheckpointWithAdamW) { expect_as_python("train_adamw"); }
TEST(StateDictZooTest, ContainersScalarsAndKeysOfEveryType) { expect_as_python("containers"); }
TEST(StateDictZooTest, EveryDtypeAndViews) { expect_as_python("dtypes"); }
TEST(StateDictZooTest, PlainStateDict) { expect_as_python("state_dict"); }
TEST(StateDictZooTest, LoneTensorIsNamedEmpty) { expect_as_python("lone_tensor"); }
TEST(StateDictZooTest, ListOfParameters) { expect_as_python("parameters"); }

TEST(StateDictZooTest, SharedTensorsAndViewsShareOneStorage) {
  const auto tensors = read_state_dict(zoo("containers.pt"));
  const auto& a = tensors.at("shared.a");
  EXPECT_TRUE(a.is_same(tensors.at("shared.b")) ||
              a.storage().data() == tensors.at("shared.b").storage().data());
  EXPECT_EQ(tensors.at("shared.list.1").storage().data(), a.storage().data());
  EXPECT_EQ(tensors.at("shared.list.1").storage_offset(), 1);
  EXPECT_EQ(tensors.at("views.offset").storage_offset(), 5);
}

TEST(StateDictZooTest, ModelLoadsStrictlyOutOfATrainingCheckpoint) {
  const auto path = zoo("train_adam.pt");
  const auto file = read_state_dict(path);
  MultiheadAttention attn(MultiheadAttentionOptions(8, 2));
  const auto result = load_state_dict(*attn, path, LoadOptions().prefix("model."));
  EXPECT_TRUE(result.missing_keys.empty());
  EXPECT_TRUE(result.unexpected_keys.empty());
  EXPECT_TRUE(result.skipped_paths.empty());
  for (const auto& [name, tensor] : state_dict(*attn)) {
    EXPECT_TRUE(test::bitwise_equal(tensor, file.at("model." + name))) << name;
  }
}

TEST(StateDictZooTest, LoadResultReportsTheSkippedPaths) {
  const auto path = zoo("containers.pt");
  MultiheadAttention attn(MultiheadAttentionOptions(4, 2));
  const auto result =
      load_state_dict(*attn, path, LoadOptions().prefix("int_keys.0.").strict(false));
  EXPECT_EQ(result.unexpected_keys, std::vector<std::string>{"exp_avg"});
  EXPECT_EQ(result.skipped_paths, read_state_dict_with_report(path).skipped);
  EXPECT_EQ(result.skipped_paths.size(), 9u);
}

}  // namespace
}  // namespace mha
