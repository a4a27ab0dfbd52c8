// Hugging Face checkpoints (mha/hugging_face.h): small random models written
// by transformers at test time (scripts/export_hf_reference.py) read as
// published, against transformers' own outputs: last_hidden_state within
// 1e-5 with padding masks, seq2seq encoder and decoder teacher-forced (whole
// and cached); the files' layouts and dtypes; the errors.

#include <mha/attention_blocks.h>
#include <mha/hugging_face.h>
#include <mha/multihead_attention.h>
#include <mha/state_dict.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "hf_reference.h"
#include "support.h"

namespace {

const auto model_dir = mha::test::hf_model_dir;
const auto reference = mha::test::hf_reference;

namespace fs = std::filesystem;
using mha::test::tensors_close;

// transformers' outputs to within 1e-5 in float32, eval mode.
constexpr double kAtol = 1e-5;

/// transformers' attention_mask (1 = attend) as mha's key padding mask (true = masked).
torch::Tensor padding_mask(const torch::Tensor& attention_mask) { return attention_mask.eq(0); }

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// ~~~ Parity ~~~

struct HfEncoderParity : ::testing::TestWithParam<std::string> {};

TEST_P(HfEncoderParity, LastHiddenState) {
  torch::NoGradGuard no_grad;
  auto ref = reference(GetParam());
  auto model = mha::load_hf_encoder(mha::read_hf_checkpoint(model_dir(GetParam())));
  torch::Tensor mask;
  if (ref.count("attention_mask")) {
    mask = padding_mask(ref.at("attention_mask"));
  }
  auto out = model.encoder->forward(ref.at("embeddings"), torch::Tensor(), mask);  // (N, L, E)
  const auto& expected = ref.at("last_hidden_state");
  EXPECT_TRUE(tensors_close(out, expected, 0.0, kAtol));
  std::printf("%s: last_hidden_state max abs diff %.3g\n", GetParam().c_str(),
              max_abs_diff(out, expected));
}

INSTANTIATE_TEST_SUITE_P(
    Models,
    HfEncoderParity,
    ::testing::Values("bert", "bert_float16", "roberta", "distilbert", "vit", "deit_bfloat16"));

struct HfSeq2SeqParity : ::testing::TestWithParam<std::string> {};

TEST_P(HfSeq2SeqParity, TeacherForced) {
  torch::NoGradGuard no_grad;
  auto ref = reference(GetParam());
  auto model = mha::load_hf_seq2seq(mha::read_hf_checkpoint(model_dir(GetParam())));
  const auto src_mask = padding_mask(ref.at("attention_mask"));
  auto memory =
      model.encoder->forward(ref.at("encoder_embeddings"), torch::Tensor(), src_mask);  // (N, S, E)
  EXPECT_TRUE(tensors_close(memory, ref.at("encoder_last_hidden_state"), 0.0, kAtol));

  const auto& tgt = ref.at("decoder_embeddings");  // (N, T, E)
  const int64_t steps = tgt.size(1);
  auto causal = mha::generate_square_subsequent_mask(steps);
  auto out =
      model.decoder->forward(tgt, memory, causal, torch::Tensor(), torch::Tensor(), src_mask);
  const auto& expected = ref.at("decoder_last_hidden_state");
  EXPECT_TRUE(tensors_close(out, expected, 0.0, kAtol));

  // One position at a time through the decoder cache.
  auto cache = model.decoder->make_cache();
  std::vector<torch::Tensor> rows;
  for (int64_t t = 0; t < steps; ++t) {
    rows.push_back(model.decoder->forward_cached(
        tgt.narrow(1, t, 1), t == 0 ? memory : torch::Tensor(), cache, {}, src_mask));
  }
  auto cached = torch::cat(rows, /*dim=*/1);
  EXPECT_TRUE(tensors_close(cached, expected, 0.0, kAtol));
  std::printf("%s: encoder %.3g, decoder %.3g, cached decoder %.3g max abs diff\n",
              GetParam().c_str(), max_abs_diff(memory, ref.at("encoder_last_hidden_state")),
              max_abs_diff(out, expected), max_abs_diff(cached, expected));
}

INSTANTIATE_TEST_SUITE_P(Models, HfSeq2SeqParity, ::testing::Values("bart", "mbart", "marian"));

// ~~~ Files ~~~

TEST(HfCheckpoint, LayoutsAndDtypes) {
  auto sharded = mha::read_hf_checkpoint(model_dir("vit"));
  EXPECT_EQ(sharded.model_type, "vit");
  EXPECT_GT(sharded.weight_files.size(), 1u);
  EXPECT_EQ(sharded.files.at("embeddings.cls_token").rfind("model-0", 0), 0u);
  auto bin = mha::read_hf_checkpoint(model_dir("distilbert"));
  EXPECT_EQ(bin.weight_files, std::vector<std::string>{"pytorch_model.bin"});
  EXPECT_EQ(mha::read_hf_checkpoint(model_dir("bert_float16"))
                .tensors.at("encoder.layer.0.attention.self.query.weight")
                .scalar_type(),
            torch::kHalf);
  auto bf16 = mha::read_hf_checkpoint(model_dir("deit_bfloat16"));
  EXPECT_EQ(bf16.tensors.at("encoder.layer.0.output.dense.weight").scalar_type(), torch::kBFloat16);
  // The tensors the encoder does not hold come back by name, as float32.
  auto deit = mha::load_hf_encoder(bf16);
  EXPECT_EQ(deit.tensors.at("embeddings.distillation_token").scalar_type(), torch::kFloat32);
  EXPECT_EQ(deit.tensors.count("encoder.layer.0.output.dense.weight"), 0u);
  auto marian = mha::read_hf_checkpoint(model_dir("marian"));
  ASSERT_TRUE(marian.generation_config.has_value());
  EXPECT_EQ(marian.generation_config->integer("max_new_tokens"), 9);
  EXPECT_TRUE(mha::is_hf_checkpoint(model_dir("roberta")));
  EXPECT_FALSE(mha::is_hf_checkpoint(model_dir("bert") + "/model.safetensors"));
}

TEST(HfCheckpoint, Seq2SeqTensorsTheStacksDoNotHold) {
  auto marian = mha::load_hf_seq2seq(mha::read_hf_checkpoint(model_dir("marian")));
  // Tied to shared (not in the file), and marian's sinusoids (computed).
  for (const char* name :
       {"shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight",
        "lm_head.weight", "final_logits_bias", "encoder.embed_positions.weight"}) {
    EXPECT_EQ(marian.tensors.count(name), 1u) << name;
  }
  EXPECT_EQ(marian.tensors.at("decoder.embed_positions.weight").sizes(),
            torch::IntArrayRef({32, 32}));
  auto mbart = mha::load_hf_seq2seq(mha::read_hf_checkpoint(model_dir("mbart")));
  EXPECT_EQ(mbart.tensors.count("encoder.layer_norm.weight"), 0u);  // the encoder's norm
  EXPECT_EQ(mbart.tensors.count("encoder.layernorm_embedding.weight"), 1u);
  EXPECT_FALSE(mbart.encoder->norm.is_empty());
}

TEST(HfCheckpoint, CheckpointMapBuildsOneAttention) {
  auto bert = mha::read_hf_checkpoint(model_dir("bert"));
  const std::string p = "encoder.layer.1.attention.";
  mha::CheckpointMap map;
  map.attention("", p + "self.query", p + "self.key", p + "self.value", p + "output.dense");
  mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(32, 4).batch_first(true));
  mha::load_checkpoint(*attn, bert.tensors, map, "bert");
  EXPECT_TRUE(
      torch::equal(attn->in_proj_weight.narrow(0, 32, 32), bert.tensors.at(p + "self.key.weight")));
  // A rule from a function of several keys.
  mha::CheckpointMap sum;
  sum.add("w", {p + "self.query.weight", p + "self.key.weight"},
          [](const std::vector<torch::Tensor>& t) { return t[0] + t[1]; });
  auto built = sum.build(bert.tensors, "bert");
  EXPECT_TRUE(torch::equal(built.at("w"), bert.tensors.at(p + "self.query.weight") +
                                              bert.tensors.at(p + "self.key.weight")));
}

// ~~~ Errors ~~~

TEST(HfCheckpointErrors, UnsupportedModelType) {
  auto checkpoint = mha::read_hf_checkpoint(model_dir("bert"));
  checkpoint.model_type = "gpt2";
  MHA_ASSERT_THROWS_WITH(mha::load_hf_encoder(checkpoint),
                         "model_type 'gpt2' is not supported by load_hf_encoder; supported: "
                         "bert, deit, distilbert, electra, roberta, vit (load_hf_seq2seq: bart, "
                         "marian, mbart; load_hf_model: gpt2, opt)");
  checkpoint.model_type = "bert";
  MHA_ASSERT_THROWS_WITH(mha::load_hf_seq2seq(checkpoint),
                         "model_type 'bert' is not supported by load_hf_seq2seq");
}

TEST(HfCheckpointErrors, MissingKeyNamesKeyAndFile) {
  auto checkpoint = mha::read_hf_checkpoint(model_dir("bert"));
  checkpoint.tensors.erase("encoder.layer.1.attention.self.key.bias");
  MHA_ASSERT_THROWS_WITH(mha::load_hf_encoder(checkpoint),
                         "bert/model.safetensors: missing key "
                         "'encoder.layer.1.attention.self.key.bias' (for "
                         "layers.1.self_attn.in_proj_bias)");
}

TEST(HfCheckpointErrors, ShapeNamesBothShapesAndTheConfigField) {
  auto checkpoint = mha::read_hf_checkpoint(model_dir("bert"));
  checkpoint.config = mha::HfConfig::parse(
      R"({"model_type": "bert", "hidden_size": 32, "num_attention_heads": 4,
          "intermediate_size": 40, "num_hidden_layers": 2})",
      "config.json");
  MHA_ASSERT_THROWS_WITH(mha::load_hf_encoder(checkpoint),
                         "layers.0.linear1.weight: expected shape (40, 32) (config.json: "
                         "hidden_size 32, intermediate_size 40), but "
                         "encoder.layer.0.intermediate.dense.weight has shape (48, 32)");
}

TEST(HfCheckpointErrors, NothingHalfLoaded) {
  auto checkpoint = mha::read_hf_checkpoint(model_dir("bert"));
  mha::CheckpointMap map;
  const std::string p = "encoder.layer.0.attention.";
  map.attention("", p + "self.query", p + "self.key", p + "self.value", p + "output.dense");
  map.rename("out_proj.bias", "encoder.layer.0.output.dense.bias");  // (32) from fc2: fine
  mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(32, 4));
  auto before = attn->in_proj_weight.clone();
  mha::CheckpointMap wrong;
  wrong.attention("", p + "self.query", p + "self.key", p + "self.value",
                  "encoder.layer.0.intermediate.dense");  // (48, 32) for out_proj
  MHA_ASSERT_THROWS_WITH(mha::load_checkpoint(*attn, checkpoint.tensors, wrong, "bert"),
                         "out_proj.weight: expected shape (32, 32)");
  EXPECT_TRUE(torch::equal(attn->in_proj_weight, before));
}

TEST(HfCheckpointErrors, FindAttentionBlocksPointsToTheHuggingFaceCall) {
  MHA_ASSERT_THROWS_WITH(mha::find_attention_blocks(model_dir("bert")),
                         "a model directory, not a weights file; for a Hugging Face model "
                         "directory the attention blocks are "
                         "mha::hf_attention_blocks(mha::read_hf_checkpoint(");
  const auto blocks = mha::hf_attention_blocks(mha::read_hf_checkpoint(model_dir("marian")));
  ASSERT_EQ(blocks.size(), 6u);  // 2 encoder layers, 2 decoder layers with cross-attention
  EXPECT_EQ(blocks[3].prefix, "model.decoder.layers.0.encoder_attn.");
  EXPECT_EQ(blocks[3].module, "decoder.layers.0.multihead_attn");
  EXPECT_EQ(blocks[3].options.num_heads(), 4);
}

TEST(HfCheckpointErrors, DirectoryWithoutWeights) {
  const auto dir = fs::temp_directory_path() / "mha_hf_no_weights";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "bert"})";
  EXPECT_FALSE(mha::is_hf_checkpoint(dir.string()));
  MHA_ASSERT_THROWS_WITH(mha::read_hf_checkpoint(dir.string()),
                         "no weights: expected model.safetensors, model.safetensors.index.json "
                         "or pytorch_model.bin");
  fs::remove_all(dir);
}

TEST(HfConfig, FieldsAndErrors) {
  auto config = mha::HfConfig::parse(
      R"({"d_model": 32, "eps": 1e-5, "act": "gelu", "eos_token_id": [1, 2], "bos": null,
          "bad_words_ids": [[7], [8, 9]]})",
      "config.json");
  EXPECT_EQ(config.integer("d_model"), 32);
  EXPECT_DOUBLE_EQ(config.number("eps"), 1e-5);
  EXPECT_EQ(config.integers("eos_token_id"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(config.integer_lists("bad_words_ids"),
            (std::vector<std::vector<int64_t>>{{7}, {8, 9}}));
  EXPECT_FALSE(config.has("bos"));
  EXPECT_EQ(config.integer("bos", 7), 7);
  MHA_ASSERT_THROWS_WITH(config.integer("heads"), "config.json: field 'heads' is missing");
  MHA_ASSERT_THROWS_WITH(config.integer("act"),
                         "config.json: expected field 'act' to be an integer, but got \"gelu\"");
}

}  // namespace
