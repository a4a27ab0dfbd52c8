// Text pipelines (mha/pipelines.h) against transformers 5.23's pipeline() on
// task models saved with real tokenizers at test time
// (scripts/export_pipeline_reference.py, CTest fixture pipeline_reference):
// each text family's sequence classifier, question answering (bert, roberta:
// transformers 4.x's algorithm ported in the export script, windows of a long
// context, top_k, the impossible answer) (the best label, all labels, sigmoid
// with top_k 2) and token classifier (every aggregation strategy, and the
// "O" label kept), on 42 texts (corpus lines and the edge cases), in batches
// of 1, 5 and 16: labels, words and characters identical, scores within 1e-5;
// and sentence embeddings (mha/sentence_transformer.h) against
// sentence-transformers' encode on directories it wrote and in the published
// format, every pooling mode, Dense and Normalize: vectors within 1e-5;
// text generation and text to text (transformers 4.x's text2text pipelines)
// against transformers' texts, the streamed pieces joining to them.
// Built into mha_tokenizer_tests (one program less to build); its own test
// names, in a named namespace.

#include <gtest/gtest.h>
#include <mha/pipelines.h>
#include <mha/sentence_transformer.h>
#include <mha/text2text_pipeline.h>
#include <mha/text_generation_pipeline.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support.h"

namespace pipelines_test {

using nlohmann::json;

std::string model_dir(const std::string& name) {
  return std::string(MHA_PIPELINE_REFERENCE_DIR) + "/" + name;
}

json answers(const std::string& name) {
  std::ifstream in(model_dir(name) + "/mha_pipeline_reference.json");
  EXPECT_TRUE(in.good()) << "run scripts/export_pipeline_reference.py";
  return json::parse(in);
}

constexpr double kScoreTolerance = 1e-5;

/// `got` is transformers' `expected` (a list of {label, score} dicts).
void expect_labels(const std::vector<mha::LabelScore>& got,
                   const json& expected,
                   const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].label, expected[i].at("label").get<std::string>()) << what << " #" << i;
    EXPECT_NEAR(got[i].score, expected[i].at("score").get<double>(), kScoreTolerance) << what;
  }
}

/// `got` is transformers' `expected` (entities, grouped or not).
void expect_entities(const std::vector<mha::Entity>& got,
                     const json& expected,
                     const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const json& e = expected[i];
    const bool grouped = e.contains("entity_group");
    EXPECT_EQ(got[i].label, e.at(grouped ? "entity_group" : "entity").get<std::string>())
        << what << " #" << i;
    EXPECT_EQ(got[i].word, e.at("word").get<std::string>()) << what << " #" << i;
    EXPECT_EQ(got[i].start, e.at("start").get<int64_t>()) << what << " #" << i;
    EXPECT_EQ(got[i].end, e.at("end").get<int64_t>()) << what << " #" << i;
    EXPECT_EQ(got[i].index, grouped ? -1 : e.at("index").get<int64_t>()) << what << " #" << i;
    EXPECT_NEAR(got[i].score, e.at("score").get<double>(), kScoreTolerance) << what << " #" << i;
  }
}

/// export_pipeline_reference.py's TOKEN_STRIDE.
constexpr int64_t kTokenStride = 8;

struct PipelineParity : ::testing::TestWithParam<std::string> {};

TEST_P(PipelineParity, TextClassificationIsTransformers) {
  const std::string name = GetParam() + "_sequence_classification";
  const json ref = answers(name);
  const auto texts = ref.at("texts").get<std::vector<std::string>>();
  const mha::TextClassificationPipeline classify(model_dir(name));
  for (const int64_t batch : {1, 5, 16}) {
    const auto best = classify(texts, mha::TextClassificationOptions().batch_size(batch));
    const auto all =
        classify(texts, mha::TextClassificationOptions().top_k(std::nullopt).batch_size(batch));
    const auto sigmoid = classify(texts, mha::TextClassificationOptions()
                                             .top_k(2)
                                             .function_to_apply(mha::ScoreFunction::kSigmoid)
                                             .batch_size(batch));
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string what =
          name + " text " + std::to_string(i) + " batch " + std::to_string(batch);
      expect_labels(best[i], ref.at("default")[i], what + " default");
      expect_labels(all[i], ref.at("all")[i], what + " top_k none");
      expect_labels(sigmoid[i], ref.at("sigmoid_top2")[i], what + " sigmoid");
    }
    // Consecutive texts as pairs ({"text": a, "text_pair": b}), cut longest first.
    std::vector<std::string> firsts, seconds;
    for (size_t i = 0; i + 1 < texts.size(); i += 2) {
      firsts.push_back(texts[i]);
      seconds.push_back(texts[i + 1]);
    }
    const auto pairs = classify(
        firsts, seconds,
        mha::TextClassificationOptions().top_k(std::nullopt).truncation(true).batch_size(batch));
    ASSERT_EQ(pairs.size(), ref.at("pairs").size());
    for (size_t i = 0; i < pairs.size(); ++i) {
      expect_labels(pairs[i], ref.at("pairs")[i],
                    name + " pair " + std::to_string(i) + " batch " + std::to_string(batch));
    }
  }
}

TEST_P(PipelineParity, TokenClassificationIsTransformers) {
  const std::string name = GetParam() + "_token_classification";
  const json ref = answers(name);
  const auto texts = ref.at("texts").get<std::vector<std::string>>();
  const mha::TokenClassificationPipeline ner(model_dir(name));
  const std::pair<const char*, mha::AggregationStrategy> strategies[] = {
      {"none", mha::AggregationStrategy::kNone},
      {"simple", mha::AggregationStrategy::kSimple},
      {"first", mha::AggregationStrategy::kFirst},
      {"average", mha::AggregationStrategy::kAverage},
      {"max", mha::AggregationStrategy::kMax}};
  for (const int64_t batch : {1, 16}) {
    for (const auto& [key, strategy] : strategies) {
      const auto got =
          ner(texts,
              mha::TokenClassificationOptions().aggregation_strategy(strategy).batch_size(batch));
      for (size_t i = 0; i < texts.size(); ++i) {
        expect_entities(
            got[i], ref.at(key)[i],
            name + " " + key + " text " + std::to_string(i) + " batch " + std::to_string(batch));
      }
    }
  }
  // Long texts in windows sharing kTokenStride tokens (bert's model_max_length is 24).
  for (size_t s = 1; s < std::size(strategies); ++s) {
    const auto& [key, strategy] = strategies[s];
    const auto got = ner(texts, mha::TokenClassificationOptions()
                                    .aggregation_strategy(strategy)
                                    .stride(kTokenStride)
                                    .batch_size(7));
    for (size_t i = 0; i < texts.size(); ++i) {
      expect_entities(got[i], ref.at(std::string("stride_") + key)[i],
                      name + " stride " + key + " text " + std::to_string(i));
    }
  }
  const auto kept = ner(texts, mha::TokenClassificationOptions().ignore_labels({}).batch_size(5));
  for (size_t i = 0; i < texts.size(); ++i) {
    expect_entities(kept[i], ref.at("none_all_labels")[i],
                    name + " all labels " + std::to_string(i));
  }
}

TEST_P(PipelineParity, QuestionAnsweringIsTransformers4) {
  if (GetParam() != "bert" && GetParam() != "roberta") GTEST_SKIP() << "bert and roberta only";
  const std::string name = GetParam() + "_question_answering";
  std::ifstream in(model_dir(name) + "/mha_qa_reference.json");
  ASSERT_TRUE(in.good()) << "run scripts/export_pipeline_reference.py";
  const json ref = json::parse(in);
  const auto questions = ref.at("questions").get<std::vector<std::string>>();
  const auto contexts = ref.at("contexts").get<std::vector<std::string>>();
  const mha::QuestionAnsweringPipeline qa(model_dir(name));
  const auto windows = mha::QuestionAnsweringOptions().max_seq_len(64).doc_stride(16);
  const std::pair<const char*, mha::QuestionAnsweringOptions> settings[] = {
      {"default", mha::QuestionAnsweringOptions()},
      {"windows", windows},
      {"windows_top3",
       mha::QuestionAnsweringOptions(windows).top_k(3).max_answer_len(4).handle_impossible_answer(
           true)},
      {"tokens", mha::QuestionAnsweringOptions().align_to_words(false)},
      {"windows_top3_tokens", mha::QuestionAnsweringOptions(windows)
                                  .top_k(3)
                                  .max_answer_len(4)
                                  .handle_impossible_answer(true)
                                  .align_to_words(false)}};
  for (const auto& [key, options] : settings) {
    for (const int64_t batch : {1, 16}) {
      const auto got =
          qa(questions, contexts, mha::QuestionAnsweringOptions(options).batch_size(batch));
      for (size_t i = 0; i < questions.size(); ++i) {
        const json& expected = ref.at(key)[i];
        const std::string what = name + " " + key + " example " + std::to_string(i);
        ASSERT_EQ(got[i].size(), expected.size()) << what;
        for (size_t a = 0; a < got[i].size(); ++a) {
          EXPECT_EQ(got[i][a].answer, expected[a].at("answer").get<std::string>()) << what;
          EXPECT_EQ(got[i][a].start, expected[a].at("start").get<int64_t>()) << what;
          EXPECT_EQ(got[i][a].end, expected[a].at("end").get<int64_t>()) << what;
          EXPECT_NEAR(got[i][a].score, expected[a].at("score").get<double>(), kScoreTolerance)
              << what;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families,
                         PipelineParity,
                         ::testing::Values("bert", "roberta", "distilbert", "electra"));

/// The seed export_pipeline_reference.py draws each prompt's texts after (SEED + index).
constexpr uint64_t kGenerationSeed = 0;

TEST(TextGenerationPipeline, TextsAreTransformers) {
  const std::string dir = model_dir("gpt2_text_generation");
  std::ifstream in(dir + "/mha_generation_reference.json");
  ASSERT_TRUE(in.good()) << "run scripts/export_pipeline_reference.py";
  const json ref = json::parse(in);
  const auto prompts = ref.at("prompts").get<std::vector<std::string>>();
  ASSERT_GE(prompts.size(), 3u);
  const mha::TextGenerationPipeline generator(dir);
  // What the pipeline adds to a call that sets nothing (the model's config sets none of it).
  const mha::GenerationConfig added = generator.call_config({});
  const json& defaults = ref.at("call_defaults");
  EXPECT_EQ(added.max_new_tokens(), defaults.at("max_new_tokens").get<int64_t>());
  EXPECT_EQ(added.do_sample(), defaults.at("do_sample").get<bool>());
  EXPECT_EQ(added.temperature(), defaults.at("temperature").get<double>());
  const std::pair<const char*, mha::TextGenerationOptions> cases[] = {
      {"sampled", mha::TextGenerationOptions().max_new_tokens(8)},
      {"greedy_new_text",
       mha::TextGenerationOptions().max_new_tokens(10).do_sample(false).return_full_text(false)},
      {"sampled_two",
       mha::TextGenerationOptions().max_new_tokens(6).temperature(1.3).generation_config(
           mha::read_generation_config(dir).num_return_sequences(2))}};
  for (const auto& [name, options] : cases) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      torch::manual_seed(kGenerationSeed + i);
      EXPECT_EQ(generator({prompts[i]}, options).at(0),
                ref.at(name)[i].get<std::vector<std::string>>())
          << name << " prompt " << i;
    }
  }
  // All prompts in one call, in left-padded batches, after one seed.
  const std::pair<const char*, mha::TextGenerationOptions> batched[] = {
      {"batched_sampled", mha::TextGenerationOptions().max_new_tokens(8).batch_size(4)},
      {"batched_greedy",
       mha::TextGenerationOptions().max_new_tokens(10).do_sample(false).batch_size(3)}};
  for (const auto& [name, options] : batched) {
    torch::manual_seed(kGenerationSeed);
    EXPECT_EQ(generator(prompts, options),
              ref.at(name).get<std::vector<std::vector<std::string>>>())
        << name;
  }
  MHA_ASSERT_THROWS_WITH(generator({""}), "prompts[0] encodes to no token");
}

TEST(Text2TextGenerationPipeline, TextsAreTransformers) {
  const std::string dir = model_dir("bart_text2text");
  std::ifstream in(dir + "/mha_text2text_reference.json");
  ASSERT_TRUE(in.good()) << "run scripts/export_pipeline_reference.py";
  const json ref = json::parse(in);
  const auto texts = ref.at("texts").get<std::vector<std::string>>();
  ASSERT_GE(texts.size(), 2 * ref.at("batch_size").get<size_t>());
  const mha::Text2TextGenerationPipeline pipeline(dir);
  const mha::GenerationConfig checkpoint = mha::read_generation_config(dir);
  const auto options = [&]() {
    return mha::Text2TextOptions().batch_size(ref.at("batch_size").get<int64_t>());
  };
  const std::pair<const char*, mha::Text2TextOptions> cases[] = {
      {"checkpoint_config", options()},
      {"greedy", options().max_new_tokens(10).generation_config(
                     mha::GenerationConfig(checkpoint).num_beams(1).no_repeat_ngram_size(0))},
      {"beams_two", options().max_new_tokens(8).generation_config(
                        mha::GenerationConfig(checkpoint).num_beams(3).num_return_sequences(2))},
      {"sampled_two",
       options().max_new_tokens(8).generation_config(mha::GenerationConfig(checkpoint)
                                                         .num_beams(1)
                                                         .do_sample(true)
                                                         .top_k(0)
                                                         .num_return_sequences(2))}};
  for (const auto& [name, call] : cases) {
    torch::manual_seed(kGenerationSeed);
    EXPECT_EQ(pipeline(texts, call), ref.at(name).get<std::vector<std::vector<std::string>>>())
        << name;
  }
}

TEST(Text2TextGenerationPipeline, StreamedPiecesJoinToTheTexts) {
  const std::string dir = model_dir("bart_text2text");
  const mha::Text2TextGenerationPipeline pipeline(dir);
  const std::vector<std::string> texts = {"One short text.", "Another, a little longer text."};
  for (const bool sample : {false, true}) {
    const mha::GenerationConfig config =
        mha::read_generation_config(dir).num_beams(1).do_sample(sample).num_return_sequences(
            sample ? 2 : 1);
    std::vector<std::vector<std::string>> streamed(texts.size(), std::vector<std::string>(2));
    size_t pieces = 0;
    const auto options = mha::Text2TextOptions().generation_config(config).on_text(
        [&](size_t input, int64_t sequence, const std::string& piece) {
          streamed.at(input).at(static_cast<size_t>(sequence)) += piece;
          ++pieces;
        });
    torch::manual_seed(kGenerationSeed);
    const auto returned = pipeline(texts, options);
    torch::manual_seed(kGenerationSeed);
    EXPECT_EQ(pipeline(texts, mha::Text2TextOptions().generation_config(config)), returned);
    for (size_t i = 0; i < texts.size(); ++i) {
      streamed[i].resize(returned[i].size());
      EXPECT_EQ(streamed[i], returned[i]) << "text " << i << (sample ? " sampled" : " greedy");
    }
    EXPECT_GT(pieces, 2 * texts.size()) << "the text came in one piece per sequence";
  }
  MHA_ASSERT_THROWS_WITH(
      pipeline(texts, mha::Text2TextOptions().on_text([](size_t, int64_t, const std::string&) {})),
      "on_text streams greedy decoding or sampling, but the generation config has num_beams 2");
  MHA_ASSERT_THROWS_WITH(pipeline(texts, mha::Text2TextOptions().batch_size(0)),
                         "batch_size: expected a positive number, but got 0");
  EXPECT_TRUE(pipeline({}).empty());
}

TEST(PipelineErrors, AModelOfAnotherTaskOrABadOption) {
  MHA_ASSERT_THROWS_WITH(
      mha::TokenClassificationPipeline(model_dir("bert_sequence_classification")),
      "TokenClassificationPipeline: expected a model ForTokenClassification, but "
      "got one ForSequenceClassification");
  const mha::TextClassificationPipeline classify(model_dir("bert_sequence_classification"));
  MHA_ASSERT_THROWS_WITH(classify({"a"}, mha::TextClassificationOptions().batch_size(0)),
                         "batch_size: expected a positive number, but got 0");
  MHA_ASSERT_THROWS_WITH(classify({"a"}, mha::TextClassificationOptions().top_k(0)),
                         "top_k: expected a positive number or none, but got 0");
  EXPECT_TRUE(classify({}).empty());
  const mha::TokenClassificationPipeline ner(model_dir("bert_token_classification"));
  MHA_ASSERT_THROWS_WITH(ner({"a"}, mha::TokenClassificationOptions().stride(4)),
                         "`stride` was provided to process all the text but "
                         "`aggregation_strategy=\"none\"`");
  MHA_ASSERT_THROWS_WITH(
      ner({"a"}, mha::TokenClassificationOptions()
                     .aggregation_strategy(mha::AggregationStrategy::kSimple)
                     .stride(24)),
      "`stride` must be less than `tokenizer.model_max_length` (or even lower if the tokenizer "
      "adds special tokens): expected 0 <= stride < 24, but got 24");
  MHA_ASSERT_THROWS_WITH(classify({"a", "b"}, {"c"}),
                         "expected a text_pair per text, but got 2 texts and 1 text_pairs");
  const mha::QuestionAnsweringPipeline qa(model_dir("bert_question_answering"));
  MHA_ASSERT_THROWS_WITH(qa({"a", "b"}, {"c"}),
                         "expected a context per question, but got 2 questions and 1 contexts");
  MHA_ASSERT_THROWS_WITH(
      qa({"a"}, {"c"}, mha::QuestionAnsweringOptions().max_seq_len(32).doc_stride(32)),
      "doc_stride (32) is larger than max_seq_len (32)");
}

TEST(PipelineOptions, TruncationCutsTextsToTheTokenizersModelMaxLength) {
  // bert's tokenizer was saved with model_max_length 24: truncated, a long
  // text's answer is that of its first 22 tokens (and the two special ones).
  const std::string name = "bert_sequence_classification";
  const mha::Tokenizer tokenizer = mha::load_hf_tokenizer(model_dir(name));
  ASSERT_EQ(tokenizer.model_max_length(), 24);
  const std::string text = answers(name).at("texts")[0].get<std::string>();
  const std::vector<int64_t> ids = tokenizer.encode(text);
  ASSERT_GT(ids.size(), 24u);
  const std::string first = tokenizer.decode({ids.begin() + 1, ids.begin() + 23});
  ASSERT_EQ(tokenizer.encode(first).size(), 24u);
  const mha::TextClassificationPipeline classify(model_dir(name));
  auto options = mha::TextClassificationOptions().top_k(std::nullopt);
  const auto short_text = classify({first}, options)[0];
  const auto cut = classify({text}, options.truncation(true))[0];
  ASSERT_EQ(cut.size(), short_text.size());
  for (size_t i = 0; i < cut.size(); ++i) {
    EXPECT_EQ(cut[i].label, short_text[i].label);
    EXPECT_NEAR(cut[i].score, short_text[i].score, 1e-6);
  }
}

struct SentenceParity : ::testing::TestWithParam<std::string> {};

TEST_P(SentenceParity, EmbeddingsAreSentenceTransformers) {
  std::ifstream in(model_dir(GetParam()) + "/mha_sentence_reference.json");
  ASSERT_TRUE(in.good()) << "run scripts/export_pipeline_reference.py";
  const json ref = json::parse(in);
  const auto texts = ref.at("texts").get<std::vector<std::string>>();
  const auto rows = ref.at("embeddings").get<std::vector<std::vector<float>>>();
  torch::Tensor expected = torch::empty(
      {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});  // (N, D)
  for (size_t i = 0; i < rows.size(); ++i) {
    expected[static_cast<int64_t>(i)].copy_(torch::tensor(rows[i]));
  }
  const mha::SentenceTransformer model(model_dir(GetParam()));
  EXPECT_EQ(model.max_seq_length(), ref.at("max_seq_length").get<int64_t>());
  EXPECT_EQ(model.dimension(), expected.size(1));
  // As loaded (prepacked), and with the float weights (prepack off).
  const mha::SentenceTransformer unpacked(model_dir(GetParam()),
                                          mha::HfModelLoadOptions().prepack(false));
  for (const int64_t batch : {1, 16}) {
    for (const auto* each : {&model, &unpacked}) {
      const torch::Tensor got = each->encode(texts, batch);
      ASSERT_EQ(got.sizes(), expected.sizes());
      const double diff = (got - expected).abs().max().item<double>();
      const char* form = each == &model ? "as loaded" : "prepack off";
      EXPECT_LE(diff, 1e-5) << GetParam() << " batch " << batch << " " << form;
      std::printf("%s batch %lld, %s: max abs diff %.3g\n", GetParam().c_str(),
                  static_cast<long long>(batch), form, diff);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modules,
                         SentenceParity,
                         ::testing::Values("st_written",
                                           "st_cls",
                                           "st_max",
                                           "st_mean_sqrt_len_tokens",
                                           "st_weightedmean",
                                           "st_lasttoken",
                                           "st_cls_mean"));

TEST(SentenceModules, WhatTheDirectorySays) {
  const mha::SentenceTransformer written(model_dir("st_written"));
  EXPECT_TRUE(written.normalized());
  EXPECT_EQ(written.pooling(), std::vector<mha::SentencePooling>{mha::SentencePooling::kMean});
  const torch::Tensor unit = written.encode({"one sentence", "and another"});
  EXPECT_TRUE(torch::allclose(unit.norm(2, -1), torch::ones({2}), 0.0, 1e-6));
  const mha::SentenceTransformer both(model_dir("st_cls_mean"));
  EXPECT_FALSE(both.normalized());
  EXPECT_EQ(both.pooling(), (std::vector<mha::SentencePooling>{mha::SentencePooling::kCls,
                                                               mha::SentencePooling::kMean}));
  EXPECT_EQ(both.encode({}).sizes(), torch::IntArrayRef({0, 64}));
}

TEST(SentenceModules, ModulesItDoesNotRunAreNamed) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "mha_sentence_modules_test";
  fs::create_directories(dir / "1_Pooling");
  const auto write = [](const fs::path& path, const std::string& text) {
    std::ofstream(path) << text;
  };
  const std::string transformer = fs::absolute(model_dir("st_cls")).string();
  write(dir / "modules.json", R"([{"idx": 0, "path": ")" + transformer +
                                  R"(", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.LSTM"}])");
  MHA_ASSERT_THROWS_WITH(mha::SentenceTransformer(dir.string()),
                         "module 'sentence_transformers.models.LSTM' is not supported; supported: "
                         "Transformer, Pooling, Dense, Normalize");
  write(dir / "modules.json", R"([{"idx": 0, "path": ")" + transformer +
                                  R"(", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])");
  write(dir / "1_Pooling" / "config.json", R"({"pooling_mode": "median"})");
  MHA_ASSERT_THROWS_WITH(mha::SentenceTransformer(dir.string()),
                         "pooling mode 'median' is not supported; supported: cls, lasttoken, max, "
                         "mean, mean_sqrt_len_tokens, weightedmean");
  fs::remove_all(dir);
}

}  // namespace pipelines_test
