// Run by scripts/tp_run.sh: each rank loads its shard of whole checkpoints in
// every format and layout (tp_checkpoints.py wrote them, in
// MHA_TP_CHECKPOINTS): the same slices as the single-process module's load;
// prefix, key map and non-strict loads; a failed load changes nothing; a
// saved .safetensors file loads back.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mha/state_dict.h"
#include "mha/tensor_parallel.h"
#include "support.h"
#include "tp_support.h"

namespace {

using mha::test::bitwise_equal;
using mha::tp_test::barrier;
using mha::tp_test::group;
using mha::tp_test::shared_path;
using torch::Tensor;

std::string checkpoint(const std::string& name) {
  return std::string(MHA_TP_CHECKPOINTS) + "/" + name;
}

/// The options of tp_checkpoints.py's module.
mha::MultiheadAttentionOptions python_options() {
  return mha::MultiheadAttentionOptions(32, 4).add_bias_kv(true).kdim(20).vdim(24);
}

/// This rank's slices of the whole module `whole`.
mha::TensorParallelMultiheadAttention slices_of(const mha::MultiheadAttention& whole) {
  mha::TensorParallelMultiheadAttention expected(whole->options, group());
  expected->load_shard_from(*whole);
  return expected;
}

void expect_same_parameters(const mha::TensorParallelMultiheadAttention& actual,
                            const mha::TensorParallelMultiheadAttention& expected,
                            const std::string& what) {
  for (const auto& p : expected->named_parameters()) {
    EXPECT_TRUE(bitwise_equal(actual->named_parameters()[p.key()], p.value()))
        << p.key() << " from " << what;
  }
}

TEST(TensorParallelLoad, EveryFormatGivesTheSingleProcessModulesSlices) {
  mha::MultiheadAttention whole(python_options());
  mha::load_state_dict(whole, checkpoint("reference.pt"));
  const auto expected = slices_of(whole);
  const std::vector<std::pair<std::string, std::string>> files{
      {"reference.pt", ""}, {"nested.pt", "model.layer.attn."}, {"deflated.pt", ""},
      {"strided.pt", ""},   {"float64.safetensors", ""},        {"scripted.pt", ""}};
  for (const auto& [file, prefix] : files) {
    mha::TensorParallelMultiheadAttention tp(python_options(), group());
    const auto result = tp->load(checkpoint(file), mha::LoadOptions().prefix(prefix));
    EXPECT_TRUE(result.missing_keys.empty() && result.unexpected_keys.empty()) << file;
    expect_same_parameters(tp, expected, file);
  }
}

/// A module holding `tensors` under timm's attention names (qkv, proj).
void save_timm_names(const std::vector<std::pair<std::string, Tensor>>& tensors,
                     const std::string& path) {
  torch::nn::Module root;
  auto qkv = root.register_module("qkv", std::make_shared<torch::nn::Module>());
  auto proj = root.register_module("proj", std::make_shared<torch::nn::Module>());
  for (const auto& [name, tensor] : tensors) {
    auto& owner = name.rfind("qkv.", 0) == 0 ? *qkv : *proj;
    owner.register_parameter(name.substr(name.find('.') + 1), tensor, /*requires_grad=*/false);
  }
  mha::save_state_dict(root, path);
}

TEST(TensorParallelLoad, KeyMapAndNonStrictLoads) {
  const auto options = mha::MultiheadAttentionOptions(16, 4);
  torch::manual_seed(1);
  mha::MultiheadAttention whole(options);
  const std::string timm = shared_path("timm.safetensors"), partial = shared_path("partial.pt");
  if (group()->getRank() == 0) {
    save_timm_names({{"qkv.weight", whole->in_proj_weight.detach()},
                     {"qkv.bias", whole->in_proj_bias.detach()},
                     {"proj.weight", whole->out_proj->weight.detach()},
                     {"proj.bias", whole->out_proj->bias.detach()}},
                    timm);
    save_timm_names({{"qkv.weight", whole->in_proj_weight.detach()},
                     {"qkv.bias", whole->in_proj_bias.detach()},
                     {"proj.weight", whole->out_proj->weight.detach()}},
                    partial);
  }
  barrier();
  mha::TensorParallelMultiheadAttention tp(options, group());
  tp->load(timm, mha::LoadOptions().key_map(mha::KeyMap::vit()));
  expect_same_parameters(tp, slices_of(whole), "timm's names");

  mha::TensorParallelMultiheadAttention fresh(options, group());
  const Tensor bias_before = fresh->out_proj->bias.detach().clone();
  MHA_ASSERT_THROWS_WITH(fresh->load(partial, mha::LoadOptions().key_map(mha::KeyMap::vit())),
                         "Missing key(s) in state_dict: \"out_proj.bias\"");
  const auto result =
      fresh->load(partial, mha::LoadOptions().key_map(mha::KeyMap::vit()).strict(false));
  EXPECT_EQ(result.missing_keys, std::vector<std::string>{"out_proj.bias"});
  EXPECT_TRUE(bitwise_equal(fresh->out_proj->bias, bias_before));
  EXPECT_TRUE(bitwise_equal(fresh->in_proj_weight, tp->in_proj_weight));
  barrier();
  if (group()->getRank() == 0) {
    std::remove(timm.c_str());
    std::remove(partial.c_str());
  }
}

TEST(TensorParallelLoad, AFailedLoadLeavesTheShardUnchanged) {
  mha::TensorParallelMultiheadAttention tp(mha::MultiheadAttentionOptions(16, 4), group());
  std::vector<Tensor> before;
  for (const auto& p : tp->parameters()) before.push_back(p.detach().clone());
  const std::string path = checkpoint("reference.pt");
  MHA_ASSERT_THROWS_WITH(tp->load(path), path + ": error(s) in loading state_dict");
  MHA_ASSERT_THROWS_WITH(tp->load(path), "size mismatch for out_proj.weight");
  MHA_ASSERT_THROWS_WITH(tp->load(path + ".missing"), path + ".missing: no such file");
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(tp->parameters()[i], before[i]));
  }
}

TEST(TensorParallelLoad, ASavedSafetensorsFileLoadsBack) {
  const auto options = mha::MultiheadAttentionOptions(16, 4).add_bias_kv(true);
  mha::TensorParallelMultiheadAttention tp(options, group());
  const std::string path = shared_path("saved.safetensors");
  tp->save(path);  // collective; rank 0 writes
  barrier();
  mha::TensorParallelMultiheadAttention loaded(options, group());
  loaded->load(path);
  expect_same_parameters(loaded, tp, path);
  barrier();
  if (group()->getRank() == 0) std::remove(path.c_str());
}

}  // namespace
