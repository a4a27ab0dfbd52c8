// mha::generate against transformers' greedy `generate` on the random-weight
// models scripts/export_hf_reference.py writes at test time, each with the
// generation_config.json written beside it (read by read_generation_config):
// marian (min_new_tokens, a bad word, the forced end token, rows that end at
// different steps) and the decoder-only gpt2, opt and opt_350m on left-padded
// prompts (min_new_tokens, no repeated 3-gram, a two-token bad word, one row
// ending early and padded). Token for token.

#include <mha/generation.h>
#include <mha/hf_models.h>
#include <mha/state_dict.h>

#include <string>

#include "support.h"

namespace {

using torch::Tensor;

std::string model_dir(const std::string& name) {
  return std::string(MHA_HF_REFERENCE_DIR) + "/" + name;
}

std::map<std::string, Tensor> reference(const std::string& name) {
  return mha::read_state_dict(model_dir(name) + "/mha_reference.pt");
}

TEST(Generate, Seq2SeqGreedyIsTransformersTokenForToken) {
  const auto values = reference("marian");
  auto model = mha::load_hf_model(model_dir("marian")).as<mha::Seq2SeqLM>();
  const mha::GenerationConfig config = mha::read_generation_config(model_dir("marian"));
  Tensor generated =
      mha::generate(model, values.at("input_ids"), values.at("attention_mask"), config);
  // The reference writes the padding (the pad token is also the start token) as -1.
  generated = generated.masked_fill(generated == *config.pad_token_id(), -1);
  generated.select(1, 0).fill_(*config.decoder_start_token_id());
  EXPECT_TRUE(torch::equal(generated, values.at("generated"))) << generated << "\n"
                                                               << values.at("generated");
}

class CausalGenerate : public ::testing::TestWithParam<std::string> {};

TEST_P(CausalGenerate, GreedyIsTransformersTokenForToken) {
  const auto values = reference(GetParam());
  auto model = mha::load_hf_model(model_dir(GetParam())).as<mha::CausalLM>();
  const mha::GenerationConfig config = mha::read_generation_config(model_dir(GetParam()));
  const Tensor generated =
      mha::generate(model, values.at("input_ids"), values.at("attention_mask"), config);
  EXPECT_TRUE(torch::equal(generated, values.at("generated"))) << generated << "\n"
                                                               << values.at("generated");
}

INSTANTIATE_TEST_SUITE_P(Families, CausalGenerate, ::testing::Values("gpt2", "opt", "opt_350m"));

TEST(Generate, RefusesWhatItDoesNotImplementYetNamingTheField) {
  const auto values = reference("gpt2");
  auto model = mha::load_hf_model(model_dir("gpt2")).as<mha::CausalLM>();
  const Tensor ids = values.at("input_ids"), mask = values.at("attention_mask");
  auto config = mha::read_generation_config(model_dir("gpt2"));
  MHA_ASSERT_THROWS_WITH(
      mha::generate(model, ids, mask, mha::GenerationConfig(config).num_beams(4)),
      "`num_beams` = 4 is not implemented yet");
  MHA_ASSERT_THROWS_WITH(
      mha::generate(model, ids, mask, mha::GenerationConfig(config).do_sample(true)),
      "`do_sample` = true is not implemented yet");
  MHA_ASSERT_THROWS_WITH(
      mha::generate(model, ids, mask, mha::GenerationConfig(config).pad_token_id(1000)),
      "`pad_token_id` holds token 1000, outside the model's vocabulary of 99 tokens");
  MHA_ASSERT_THROWS_WITH(
      mha::generate(model, ids, mask, mha::GenerationConfig(config).bad_words_ids({{5, 120}})),
      "The model vocabulary size is 99, but the following tokens were being biased: [120]");
}

}  // namespace
