// Finding attention blocks and the errors that lead to the fix, on checkpoints
// shaped like torchvision's ViT-B/16, open_clip's ViT-B-32 and CoCa,
// torchaudio's Conformer and timm's ViT (scripts/export_library_checkpoints.py,
// run by CTest into the fixture state_dict_checkpoints). Its manifest.json,
// written from the Python modules' own attributes, gives the expected blocks.

#include <gtest/gtest.h>
#include <mha/attention_blocks.h>
#include <mha/multihead_attention.h>
#include <mha/state_dict.h>
#include <mha/transformer.h>
#include <torch/torch.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "module_state.h"
#include "support.h"
#include "weights_files.h"

namespace mha {
namespace {

using nlohmann::json;
using torch::Tensor;

/// A file of export_library_checkpoints.py.
std::string library_file(const std::string& name) {
  return test::fixture("library_models/" + name);
}

const json& manifest() {
  static const json parsed = [] {
    std::ifstream in(library_file("manifest.json"));
    return json::parse(in);
  }();
  return parsed;
}

const char* naming_name(AttentionNaming naming) {
  return naming == AttentionNaming::kQkvProj ? "qkv/proj" : "MultiheadAttention";
}

/// The message of the c10::Error that `load` throws ("" and a failure if none).
template <typename Load>
std::string error_of(Load&& load) {
  try {
    load();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  ADD_FAILURE() << "expected a c10::Error";
  return "";
}

void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos)
      << "error message:\n  " << message << "\ndoes not contain:\n  " << part;
}

/// Runs `load` on `module`, which must throw; returns the message and checks
/// that the module is unchanged, bit for bit.
template <typename Load>
std::string failed_load(const torch::nn::Module& module, Load&& load) {
  const auto before = support::snapshot(module);
  const std::string message = error_of(load);
  EXPECT_EQ(support::state_difference(support::snapshot(module), before), "")
      << "the failed load changed the module";
  return message;
}

// ~~~ find_attention_blocks against what Python built ~~~

struct StateDictBlocksTest : test::SeedingFixture {};

TEST_F(StateDictBlocksTest, RowsAreThoseOfThePythonModules) {
  ASSERT_EQ(manifest().size(), 5u);
  for (const auto& [file, entry] : manifest().items()) {
    SCOPED_TRACE(file);
    const auto blocks = find_attention_blocks(library_file(file));
    std::map<std::string, AttentionBlock> found;
    for (const auto& block : blocks) {
      found.emplace(block.prefix, block);
    }
    ASSERT_EQ(blocks.size(), entry.at("blocks").size());
    for (const auto& expected : entry.at("blocks")) {
      const std::string prefix = expected.at("prefix");
      ASSERT_TRUE(found.count(prefix)) << prefix;
      const AttentionBlock& block = found.at(prefix);
      EXPECT_EQ(naming_name(block.naming), expected.at("naming").get<std::string>()) << prefix;
      EXPECT_EQ(block.embed_dim, expected.at("embed_dim").get<int64_t>()) << prefix;
      EXPECT_EQ(block.kdim, expected.at("kdim").get<int64_t>()) << prefix;
      EXPECT_EQ(block.vdim, expected.at("vdim").get<int64_t>()) << prefix;
      EXPECT_EQ(block.bias, expected.at("bias").get<bool>()) << prefix;
      EXPECT_EQ(block.add_bias_kv, expected.at("add_bias_kv").get<bool>()) << prefix;
      EXPECT_EQ(block.packed, expected.at("packed").get<bool>()) << prefix;
      EXPECT_EQ(block.dtype, torch::kFloat32) << prefix;
      EXPECT_EQ(block.keys.size(), block.packed ? 4u : 6u) << prefix;
    }
  }
}

TEST_F(StateDictBlocksTest, OrderCountsNumbersAsNumbers) {
  const auto blocks = find_attention_blocks(library_file("vit_b_16.pth"));
  ASSERT_EQ(blocks.size(), 12u);
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(blocks[i].prefix,
              "encoder.layers.encoder_layer_" + std::to_string(i) + ".self_attention.");
  }
  EXPECT_EQ(blocks[0].keys, (std::vector<std::string>{
                                "encoder.layers.encoder_layer_0.self_attention.in_proj_weight",
                                "encoder.layers.encoder_layer_0.self_attention.in_proj_bias",
                                "encoder.layers.encoder_layer_0.self_attention.out_proj.weight",
                                "encoder.layers.encoder_layer_0.self_attention.out_proj.bias"}));
}

TEST_F(StateDictBlocksTest, SameOverAStateDictAlreadyRead) {
  for (const auto& [file, entry] : manifest().items()) {
    const auto from_path = find_attention_blocks(library_file(file));
    const auto from_map = find_attention_blocks(read_state_dict(library_file(file)));
    ASSERT_EQ(from_map.size(), from_path.size()) << file;
    for (size_t i = 0; i < from_map.size(); ++i) {
      EXPECT_EQ(from_map[i].prefix, from_path[i].prefix) << file;
      EXPECT_EQ(from_map[i].keys, from_path[i].keys) << file;
    }
  }
}

TEST_F(StateDictBlocksTest, EachBlocksOptionsLoadItAndMatchPython) {
  for (const auto& [file, entry] : manifest().items()) {
    SCOPED_TRACE(file);
    const std::string prefix = entry.at("io").at("prefix");
    const json* row = nullptr;
    for (const auto& b : entry.at("blocks")) {
      if (b.at("prefix") == prefix) row = &b;
    }
    ASSERT_NE(row, nullptr);
    const auto blocks = find_attention_blocks(library_file(file));
    const auto block = std::find_if(blocks.begin(), blocks.end(),
                                    [&](const AttentionBlock& b) { return b.prefix == prefix; });
    ASSERT_NE(block, blocks.end());
    MultiheadAttention attn(block->options(row->at("num_heads").get<int64_t>())
                                .batch_first(row->at("batch_first").get<bool>()));
    LoadOptions load = LoadOptions().prefix(prefix);
    if (block->naming == AttentionNaming::kQkvProj) load.key_map(KeyMap::vit());
    load_state_dict(attn, library_file(file), load);
    attn->eval();
    const auto io = read_state_dict(library_file(entry.at("io").at("file")));
    const auto output = std::get<0>(attn(io.at("query"), io.at("key"), io.at("value")));
    EXPECT_TRUE(test::tensors_close(output, io.at("output"), 1.3e-6, 1e-5));
  }
}

TEST_F(StateDictBlocksTest, SummaryGroupsPrefixesThatDifferInTheirNumbers) {
  EXPECT_EQ(summarize_attention_blocks(find_attention_blocks(library_file("vit_b_16.pth"))),
            "12 attention blocks under encoder.layers.encoder_layer_{0..11}.self_attention. "
            "(embed_dim=16)");
  EXPECT_EQ(
      summarize_attention_blocks(find_attention_blocks(library_file("coca_vit_b_32.safetensors"))),
      "9 attention blocks: 2 under text.transformer.resblocks.{0,1}.attn. (embed_dim=8); "
      "2 under text_decoder.cross_attn.{0,1}.attn. (embed_dim=8); "
      "2 under text_decoder.resblocks.{0,1}.attn. (embed_dim=8); "
      "1 under visual.attn_pool.attn. (embed_dim=8, kdim=16, vdim=16, separate q/k/v); "
      "2 under visual.transformer.resblocks.{0,1}.attn. (embed_dim=16)");
  EXPECT_EQ(summarize_attention_blocks(find_attention_blocks(library_file("timm_vit.safetensors"))),
            "4 attention blocks under blocks.{0..3}.attn. (embed_dim=16, qkv/proj names: "
            "KeyMap::vit())");
  EXPECT_EQ(summarize_attention_blocks({}), "no attention blocks");
}

TEST_F(StateDictBlocksTest, SummaryOfGapsOptionsAndNoPrefix) {
  std::map<std::string, Tensor> sd;
  for (const int layer : {0, 1, 2, 3, 5, 10, 12}) {
    const auto names = state_dict(MultiheadAttention(MultiheadAttentionOptions(8, 2).bias(false)));
    for (const auto& [name, tensor] : names) {
      sd.emplace("layers." + std::to_string(layer) + ".attn." + name, tensor);
    }
  }
  for (const auto& [name, tensor] :
       state_dict(MultiheadAttention(MultiheadAttentionOptions(8, 2).add_bias_kv(true)))) {
    sd.emplace(name, tensor);
  }
  EXPECT_EQ(summarize_attention_blocks(find_attention_blocks(sd)),
            "8 attention blocks: 1 with no prefix (embed_dim=8, add_bias_kv); "
            "7 under layers.{0..3,5,10,12}.attn. (embed_dim=8, no bias)");
}

TEST_F(StateDictBlocksTest, OtherKeysAreNoBlocks) {
  // timm's patch_embed.proj is a Conv2d: proj.* without a qkv is no attention.
  for (const auto& block : find_attention_blocks(library_file("timm_vit.safetensors"))) {
    EXPECT_NE(block.prefix, "patch_embed.");
  }
  EXPECT_TRUE(find_attention_blocks(test::fixture("dtypes.pt")).empty());
  const auto single = find_attention_blocks(test::fixture("mha.pt"));
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(single[0].prefix, "");
  // The output projection alone, or an input projection that is not a matrix, is no block.
  const std::map<std::string, Tensor> partial{{"a.out_proj.weight", torch::zeros({4, 4})},
                                              {"b.in_proj_weight", torch::zeros({12})},
                                              {"b.out_proj.weight", torch::zeros({4, 4})}};
  EXPECT_TRUE(find_attention_blocks(partial).empty());
}

// ~~~ errors that lead to the fix ~~~

struct StateDictHintsTest : test::SeedingFixture {};

/// Each library's natural guess at a prefix, and the block it meant.
struct Guess {
  std::string file, guess, meant;
  MultiheadAttentionOptions options;
};

std::vector<Guess> guesses() {
  return {{"vit_b_16.pth", "encoder.layers.0.self_attention.",
           "encoder.layers.encoder_layer_0.self_attention.", MultiheadAttentionOptions(16, 4)},
          {"open_clip_vit_b_32.bin", "transformer.resblocks.0.self_attn.",
           "transformer.resblocks.0.attn.", MultiheadAttentionOptions(8, 2)},
          {"coca_vit_b_32.safetensors", "visual.attn_pool.self_attn.", "visual.attn_pool.attn.",
           MultiheadAttentionOptions(8, 2).kdim(16).vdim(16)},
          {"conformer.pt", "conformer_layers.0.self_attention.", "conformer_layers.0.self_attn.",
           MultiheadAttentionOptions(16, 4)},
          {"timm_vit.safetensors", "blocks.0.self_attn.", "blocks.0.attn.",
           MultiheadAttentionOptions(16, 4)}};
}

TEST_F(StateDictHintsTest, PrefixThatMatchesNothingSaysWhichOneWasMeant) {
  for (const auto& guess : guesses()) {
    SCOPED_TRACE(guess.file);
    const std::string path = library_file(guess.file);
    MultiheadAttention attn(guess.options);
    const std::string message =
        failed_load(*attn, [&] { load_state_dict(attn, path, LoadOptions().prefix(guess.guess)); });
    EXPECT_EQ(message.rfind(path + ": prefix '" + guess.guess + "' matches no key", 0), 0u)
        << message;
    expect_contains(message, "did you mean '" + guess.meant + "'?");
    expect_contains(message, summarize_attention_blocks(find_attention_blocks(path)));
    expect_contains(message, "mha-parity --list");
    EXPECT_LT(message.size(), 2000u);
    // The one step: the suggested prefix loads.
    LoadOptions fixed = LoadOptions().prefix(guess.meant);
    if (guess.file == "timm_vit.safetensors") fixed.key_map(KeyMap::vit());
    EXPECT_NO_THROW(load_state_dict(attn, path, fixed));
  }
}

TEST_F(StateDictHintsTest, WholeModelStrictErrorSummarisesTheBlocks) {
  MultiheadAttention attn(16, 4);
  const std::string path = library_file("vit_b_16.pth");
  const std::string message = failed_load(*attn, [&] { load_state_dict(attn, path); });
  EXPECT_LT(message.size(), 2000u) << message;
  expect_contains(message, path + ": error(s) in loading state_dict for mha::MultiheadAttention:");
  expect_contains(message,
                  "Missing key(s) in state_dict: \"in_proj_weight\", \"in_proj_bias\", "
                  "\"out_proj.weight\", \"out_proj.bias\".");
  expect_contains(message, "Unexpected key(s) in state_dict: \"class_token\", \"conv_proj.bias\"");
  expect_contains(message, "... (152 in all).");
  expect_contains(message,
                  "hint: the 152 keys hold 12 attention blocks under "
                  "encoder.layers.encoder_layer_{0..11}.self_attention. (embed_dim=16)");
  expect_contains(message,
                  "did you mean LoadOptions().prefix(\"encoder.layers.encoder_layer_0."
                  "self_attention.\")?");
}

TEST_F(StateDictHintsTest, EveryWholeModelErrorIsShortAndNamesTheBlocks) {
  for (const auto& guess : guesses()) {
    SCOPED_TRACE(guess.file);
    MultiheadAttention attn(guess.options);
    const std::string path = library_file(guess.file);
    const std::string message = failed_load(*attn, [&] { load_state_dict(attn, path); });
    EXPECT_LT(message.size(), 2000u) << message;
    expect_contains(message, summarize_attention_blocks(find_attention_blocks(path)));
    expect_contains(message, "did you mean LoadOptions().prefix(\"");
  }
}

TEST_F(StateDictHintsTest, WithoutAPrefixTheBlockSuggestedFitsTheModule) {
  const std::string path = library_file("coca_vit_b_32.safetensors");
  MultiheadAttention pooler(MultiheadAttentionOptions(8, 2).kdim(16).vdim(16));
  expect_contains(failed_load(*pooler, [&] { load_state_dict(pooler, path); }),
                  "did you mean LoadOptions().prefix(\"visual.attn_pool.attn.\")?");
  MultiheadAttention visual(16, 4);
  expect_contains(failed_load(*visual, [&] { load_state_dict(visual, path); }),
                  "did you mean LoadOptions().prefix(\"visual.transformer.resblocks.0.attn.\")?");
  // timm: the prefix, and the key map it needs.
  MultiheadAttention timm(16, 4);
  const std::string message =
      failed_load(*timm, [&] { load_state_dict(timm, library_file("timm_vit.safetensors")); });
  expect_contains(message, "did you mean LoadOptions().prefix(\"blocks.0.attn.\")?");
  expect_contains(message,
                  "hint: the attention at 'blocks.0.attn.' has timm's qkv/proj names: "
                  "load it with LoadOptions().key_map(mha::KeyMap::vit())");
}

TEST_F(StateDictHintsTest, AGuessedPrefixLeadsToABlockOfTheModulesWidth) {
  // CoCa: the nearest name is the pooler (embed_dim 8, kdim 16); a 16-wide
  // module is pointed to a 16-wide block instead.
  const std::string path = library_file("coca_vit_b_32.safetensors");
  MultiheadAttention visual(16, 4);
  const std::string message = failed_load(*visual, [&] {
    load_state_dict(visual, path, LoadOptions().prefix("visual.attn_pool.self_attn."));
  });
  expect_contains(message, "did you mean 'visual.transformer.resblocks.0.attn.'?");
}

TEST_F(StateDictHintsTest, PrefixOfTheLayerPointsToItsAttention) {
  MultiheadAttention attn(16, 4);
  const std::string message = failed_load(*attn, [&] {
    load_state_dict(attn, library_file("conformer.pt"),
                    LoadOptions().prefix("conformer_layers.1."));
  });
  expect_contains(message, "Unexpected key(s) in state_dict:");
  expect_contains(message, "did you mean LoadOptions().prefix(\"conformer_layers.1.self_attn.\")?");
}

TEST_F(StateDictHintsTest, QkvProjNamesSuggestKeyMapVit) {
  MultiheadAttention attn(MultiheadAttentionOptions(16, 4).batch_first(true));
  const std::string path = library_file("timm_vit.safetensors");
  const std::string message = failed_load(
      *attn, [&] { load_state_dict(attn, path, LoadOptions().prefix("blocks.2.attn.")); });
  expect_contains(message, "Missing key(s) in state_dict: \"in_proj_weight\"");
  expect_contains(message,
                  "Unexpected key(s) in state_dict: \"proj.bias\", \"proj.weight\", "
                  "\"qkv.bias\", \"qkv.weight\".");
  expect_contains(message,
                  "hint: the attention at 'blocks.2.attn.' has timm's qkv/proj names: load it "
                  "with LoadOptions().key_map(mha::KeyMap::vit())");
  EXPECT_NO_THROW(
      load_state_dict(attn, path, LoadOptions().prefix("blocks.2.attn.").key_map(KeyMap::vit())));
}

TEST_F(StateDictHintsTest, SeparateProjectionsSuggestTheirKdimAndVdim) {
  MultiheadAttention attn(MultiheadAttentionOptions(8, 2).batch_first(true));
  const std::string path = library_file("coca_vit_b_32.safetensors");
  const LoadOptions options = LoadOptions().prefix("visual.attn_pool.attn.");
  const std::string message = failed_load(*attn, [&] { load_state_dict(attn, path, options); });
  expect_contains(message, "Missing key(s) in state_dict: \"in_proj_weight\".");
  expect_contains(message, "\"q_proj_weight\"");
  expect_contains(message,
                  "hint: the attention at 'visual.attn_pool.attn.' has embed_dim=8, kdim=16, "
                  "vdim=16, separate q/k/v; the module's has embed_dim=8: build it with "
                  "mha::MultiheadAttentionOptions(8, num_heads).kdim(16).vdim(16)");
  MultiheadAttention fixed(MultiheadAttentionOptions(8, 2).kdim(16).vdim(16));
  EXPECT_NO_THROW(load_state_dict(fixed, path, options));
}

TEST_F(StateDictHintsTest, PackedProjectionSuggestsNoKdim) {
  MultiheadAttention attn(MultiheadAttentionOptions(16, 4).kdim(8).vdim(8));
  const std::string message = failed_load(*attn, [&] {
    load_state_dict(attn, library_file("conformer.pt"),
                    LoadOptions().prefix("conformer_layers.0.self_attn."));
  });
  expect_contains(message,
                  "hint: the attention at 'conformer_layers.0.self_attn.' has embed_dim=16; the "
                  "module's has embed_dim=16, kdim=8, vdim=8, separate q/k/v: build it with "
                  "mha::MultiheadAttentionOptions(16, num_heads)");
}

TEST_F(StateDictHintsTest, BiasAndBiasKvDifferences) {
  std::map<std::string, Tensor> sd;
  for (const auto& [name, tensor] : state_dict(
           MultiheadAttention(MultiheadAttentionOptions(16, 4).bias(false).add_bias_kv(true)))) {
    sd.emplace("model.attn." + name, tensor);
  }
  MultiheadAttention attn(16, 4);
  const std::string message = failed_load(
      *attn, [&] { load_state_dict(attn, sd, LoadOptions().prefix("model.attn."), "mine.pt"); });
  expect_contains(message, "mine.pt: error(s) in loading state_dict");
  expect_contains(message,
                  "build it with mha::MultiheadAttentionOptions(16, num_heads).bias(false)"
                  ".add_bias_kv(true)");
}

TEST_F(StateDictHintsTest, ModuleWithAttentionInsideGetsTheLayerPrefix) {
  // A C++ TransformerEncoderLayer has its attention at self_attn.: the
  // prefix suggested is the layer's, under which the file has it.
  TransformerEncoderLayer layer(TransformerLayerOptions(16, 4).dim_feedforward(32));
  const std::string path = test::fixture("transformer.pt");
  const std::string message = failed_load(
      *layer, [&] { load_state_dict(layer, path, LoadOptions().prefix("encoder.layer.0.")); });
  expect_contains(message, "did you mean 'encoder.layers.0.'?");
  EXPECT_NO_THROW(load_state_dict(layer, path, LoadOptions().prefix("encoder.layers.0.")));
}

TEST_F(StateDictHintsTest, SelectStateDictSuggestsTooAndWithoutBlocksListsKeys) {
  const auto sd = read_state_dict(library_file("conformer.pt"));
  MHA_ASSERT_THROWS_WITH(select_state_dict(sd, LoadOptions().prefix("conformer_layers.3.attn")),
                         "state_dict: prefix 'conformer_layers.3.attn.' matches no key; did you "
                         "mean 'conformer_layers.3.self_attn.'?");
  MHA_ASSERT_THROWS_WITH(
      select_state_dict(read_state_dict(test::fixture("dtypes.pt")), LoadOptions().prefix("x."),
                        "dtypes.pt"),
      "dtypes.pt: prefix 'x.' matches no key; the keys are 'bf16.weight', 'bool.mask'");
}

}  // namespace
}  // namespace mha
