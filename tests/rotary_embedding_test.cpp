// mha::RotaryEmbedding, rope_frequencies, apply_rotary_pos_emb and
// read_rope_parameters against transformers 5.23's rotary embeddings
// (scripts/export_rope_reference.py, CTest fixture rope_reference): each rope
// type (default, linear, dynamic, yarn, longrope, llama3), a partial rotation
// and an older config's rope_scaling, read from the config.json transformers
// saved; for each call of a sequence of position batches the cos, sin,
// inverse frequencies and attention scaling, and a rotated query: identical
// bits (the same float32 operations in the same order).

#include <gtest/gtest.h>
#include <mha/hugging_face.h>
#include <mha/rotary_embedding.h>
#include <mha/state_dict.h>
#include <torch/torch.h>

#include <map>
#include <string>

#include "support.h"

namespace {

std::string case_dir(const std::string& name) {
  return std::string(MHA_ROPE_REFERENCE_DIR) + "/" + name;
}

/// The rotary embedding of `dir`'s config.json, as a Llama-shaped model builds it.
mha::RotaryEmbedding rotary_of(const std::string& dir) {
  const mha::HfConfig config = mha::HfConfig::read(dir + "/config.json");
  const int64_t head_dim = config.integer(
      "head_dim", config.integer("hidden_size") / config.integer("num_attention_heads"));
  return mha::RotaryEmbedding(
      mha::RotaryEmbeddingOptions(head_dim, config.integer("max_position_embeddings"))
          .rope(mha::read_rope_parameters(config)));
}

struct RopeParity : ::testing::TestWithParam<std::string> {};

TEST_P(RopeParity, EachCallIsTransformers) {
  const std::string dir = case_dir(GetParam());
  const auto ref = mha::read_state_dict(dir + "/mha_rope_reference.safetensors");
  mha::RotaryEmbedding rotary = rotary_of(dir);
  size_t calls = 0;
  for (; ref.count("positions_" + std::to_string(calls)) != 0; ++calls) {
    const std::string i = std::to_string(calls);
    const auto [cos, sin] = rotary(ref.at("positions_" + i));  // (N, L, d)
    EXPECT_TRUE(torch::equal(rotary->inv_freq, ref.at("inv_freq_" + i))) << "call " << i;
    EXPECT_EQ(rotary->attention_scaling, ref.at("attention_scaling_" + i).item<double>())
        << "call " << i;
    EXPECT_TRUE(torch::equal(cos, ref.at("cos_" + i))) << "cos, call " << i;
    EXPECT_TRUE(torch::equal(sin, ref.at("sin_" + i))) << "sin, call " << i;
    EXPECT_TRUE(
        torch::equal(mha::apply_rotary_pos_emb(ref.at("q_" + i), cos, sin), ref.at("q_embed_" + i)))
        << "rotated query, call " << i;
  }
  EXPECT_GT(calls, 0u);
}

INSTANTIATE_TEST_SUITE_P(Types,
                         RopeParity,
                         ::testing::Values("default",
                                           "default_head_128",
                                           "linear",
                                           "dynamic",
                                           "yarn",
                                           "yarn_mscale",
                                           "llama3",
                                           "phi3_partial",
                                           "longrope",
                                           "legacy_linear"));

TEST(RotaryEmbedding, BadParametersAreErrors) {
  MHA_ASSERT_THROWS_WITH(mha::rope_frequencies(mha::RopeParameters().rope_type("ntk"), 64, 128),
                         "rope_type 'ntk' is not supported; supported: default, linear, dynamic, "
                         "yarn, longrope, llama3");
  MHA_ASSERT_THROWS_WITH(mha::rope_frequencies(mha::RopeParameters().rope_type("linear"), 64, 128),
                         "rope_type 'linear' needs rope_parameters['factor'], which is missing");
  MHA_ASSERT_THROWS_WITH(
      mha::rope_frequencies(mha::RopeParameters().partial_rotary_factor(0.01), 64, 128),
      "expected an even rotary dim in [2, head_dim 64]");
  MHA_ASSERT_THROWS_WITH(
      mha::rope_frequencies(mha::RopeParameters()
                                .rope_type("longrope")
                                .original_max_position_embeddings(64)
                                .short_factor({1.0, 2.0}),
                            64, 128),
      "longrope's short_factor: expected 32 factors (rotary dim / 2), but got 2");
  const auto x = torch::zeros({1, 2, 3, 8});
  MHA_ASSERT_THROWS_WITH(
      mha::apply_rotary_pos_emb(x, torch::zeros({1, 3, 10}), torch::zeros({1, 3, 10})),
      "expected x (N, H, L, D) and cos, sin (N, L, d) with an even d <= D");
}

}  // namespace
