// Whole Hugging Face models (mha/hf_models.h): each family's directory,
// written by transformers at test time with random weights
// (scripts/export_hf_reference.py), loaded by mha::load_hf_model and compared
// with transformers' own outputs at the real (not padded) positions, within
// 1e-5 in float32: encoders' `model(input_ids, attention_mask,
// token_type_ids)` and `model(pixel_values)`, seq2seq LMs'
// `model(input_ids, attention_mask, decoder_input_ids).logits` and their
// cached and paged steps, causal LMs' `model(input_ids, attention_mask,
// position_ids).logits` (left padding) and their cached and paged steps; then what a LibTorch user
// does with a module (save, load, clone, to, prepack, quantize_dynamic) and the errors.

#include <mha/hf_models.h>
#include <mha/prepack.h>
#include <mha/quantization.h>
#include <mha/state_dict.h>
#include <torch/torch.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>

#include "hf_reference.h"
#include "silent_warnings.h"
#include "support.h"

namespace {

const auto model_dir = mha::test::hf_model_dir;
const auto reference = mha::test::hf_reference;

namespace fs = std::filesystem;
using mha::test::tensors_close;
using torch::Tensor;

// transformers' outputs to within 1e-5 in float32, eval mode.
constexpr double kAtol = 1e-5;

/// The rows of `t` (N, L, ...) at the positions `attention_mask` (N, L) marks 1: (K, ...).
Tensor real(const Tensor& t, const Tensor& attention_mask) {
  return t.index({attention_mask.ne(0)});
}

double max_abs_diff(const Tensor& a, const Tensor& b) { return (a - b).abs().max().item<double>(); }

/// `actual` within kAtol of `expected` at the real positions, reported by name.
void expect_close_at_real(const std::string& what,
                          const Tensor& actual,
                          const Tensor& expected,
                          const Tensor& attention_mask) {
  const Tensor a = real(actual, attention_mask), e = real(expected, attention_mask);
  EXPECT_TRUE(tensors_close(a, e, 0.0, kAtol)) << what;
  std::printf("%s: max abs diff %.3g\n", what.c_str(), max_abs_diff(a, e));
}

// ~~~ Encoders: transformers' AutoModel(...)(input_ids, attention_mask, token_type_ids) ~~~

struct TextEncoderModelParity : ::testing::TestWithParam<std::string> {};

TEST_P(TextEncoderModelParity, LastHiddenStateAndPoolerFromTokenIds) {
  torch::NoGradGuard no_grad;
  auto ref = reference(GetParam());
  const Tensor types = ref.count("token_type_ids") ? ref.at("token_type_ids") : Tensor();
  const Tensor mask = ref.at("attention_mask");
  // the default layout of this CPU, then each layout
  for (const std::optional<bool> panels :
       {std::optional<bool>(), std::optional<bool>(false), std::optional<bool>(true)}) {
    const std::string name = GetParam() + (panels ? *panels ? " panels" : " oneDNN" : "");
    auto model =
        mha::load_hf_model(model_dir(GetParam()), mha::HfModelLoadOptions().encoder_panels(panels))
            .as<mha::TextEncoderModel>();
    auto out = model(ref.at("input_ids"), mask, types);
    expect_close_at_real(name + " embeddings", model->embed(ref.at("input_ids"), types),
                         ref.at("embeddings"), mask);
    expect_close_at_real(name + " last_hidden_state", out.last_hidden_state,
                         ref.at("last_hidden_state"), mask);
    EXPECT_EQ(out.pooler_output.defined(), ref.count("pooler_output") == 1);
    if (ref.count("pooler_output")) {
      EXPECT_TRUE(tensors_close(out.pooler_output, ref.at("pooler_output"), 0.0, kAtol)) << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models,
                         TextEncoderModelParity,
                         ::testing::Values("bert",
                                           "bert_float16",
                                           "bert_served",
                                           "roberta",
                                           "distilbert",
                                           "electra",
                                           "electra_small"));

struct VisionEncoderModelParity : ::testing::TestWithParam<std::string> {};

TEST_P(VisionEncoderModelParity, LastHiddenStateFromPixels) {
  torch::NoGradGuard no_grad;
  auto ref = reference(GetParam());
  auto model = mha::load_hf_model(model_dir(GetParam())).as<mha::VisionEncoderModel>();
  auto out = model(ref.at("pixel_values"));
  EXPECT_TRUE(
      tensors_close(model->embed(ref.at("pixel_values")), ref.at("embeddings"), 0.0, kAtol));
  EXPECT_TRUE(tensors_close(out.last_hidden_state, ref.at("last_hidden_state"), 0.0, kAtol));
  std::printf("%s: last_hidden_state max abs diff %.3g\n", GetParam().c_str(),
              max_abs_diff(out.last_hidden_state, ref.at("last_hidden_state")));
  EXPECT_EQ(out.pooler_output.defined(), ref.count("pooler_output") == 1);
  if (ref.count("pooler_output")) {
    EXPECT_TRUE(tensors_close(out.pooler_output, ref.at("pooler_output"), 0.0, kAtol));
  }
}

INSTANTIATE_TEST_SUITE_P(Models,
                         VisionEncoderModelParity,
                         ::testing::Values("vit", "deit_bfloat16"));

// ~~~ Task models: transformers' AutoModelFor...(...) logits ~~~

struct TaskModelParity : ::testing::TestWithParam<std::string> {};

TEST_P(TaskModelParity, LogitsOfEachFamilysHead) {
  torch::NoGradGuard no_grad;
  auto ref = reference(GetParam());
  for (const bool prepacked : {true, false}) {
    const std::string name = GetParam() + (prepacked ? " prepacked" : " float");
    const mha::HfModel loaded =
        mha::load_hf_model(model_dir(GetParam()), mha::HfModelLoadOptions().prepack(prepacked));
    if (ref.count("pixel_values")) {
      ASSERT_EQ(loaded.class_name(), "mha::ImageClassifier");
      const auto out = loaded.as<mha::ImageClassifier>()(ref.at("pixel_values"));
      EXPECT_TRUE(tensors_close(out.logits, ref.at("logits"), 0.0, kAtol)) << name;
      std::printf("%s: logits max abs diff %.3g\n", name.c_str(),
                  max_abs_diff(out.logits, ref.at("logits")));
      continue;
    }
    ASSERT_EQ(loaded.class_name(), "mha::TextTaskModel");
    auto model = loaded.as<mha::TextTaskModel>();
    const Tensor types = ref.count("token_type_ids") ? ref.at("token_type_ids") : Tensor();
    const Tensor mask = ref.at("attention_mask");
    const auto out = model(ref.at("input_ids"), mask, types);
    expect_close_at_real(name + " last_hidden_state",
                         model->model(ref.at("input_ids"), mask, types).last_hidden_state,
                         ref.at("last_hidden_state"), mask);
    if (ref.count("start_logits")) {
      expect_close_at_real(name + " start_logits", out.start_logits, ref.at("start_logits"), mask);
      expect_close_at_real(name + " end_logits", out.end_logits, ref.at("end_logits"), mask);
    } else if (ref.at("logits").dim() == 3) {  // tokens' labels
      expect_close_at_real(name + " logits", out.logits, ref.at("logits"), mask);
    } else {
      EXPECT_TRUE(tensors_close(out.logits, ref.at("logits"), 0.0, kAtol)) << name;
      std::printf("%s: logits max abs diff %.3g\n", name.c_str(),
                  max_abs_diff(out.logits, ref.at("logits")));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models,
                         TaskModelParity,
                         ::testing::Values("bert_sequence_classification",
                                           "bert_token_classification",
                                           "bert_question_answering",
                                           "bert_served_sequence_classification",
                                           "roberta_sequence_classification",
                                           "roberta_token_classification",
                                           "roberta_question_answering",
                                           "distilbert_sequence_classification",
                                           "distilbert_token_classification",
                                           "distilbert_question_answering",
                                           "electra_sequence_classification",
                                           "electra_token_classification",
                                           "electra_question_answering",
                                           "vit_image_classification",
                                           "deit_image_classification_with_teacher"));

TEST(TaskModel, LabelsAndProblemTypeComeWithTheModel) {
  const auto bert =
      mha::load_hf_model(model_dir("bert_sequence_classification")).as<mha::TextTaskModel>();
  EXPECT_EQ(bert->options.id2label(),
            (std::vector<std::string>{"NEGATIVE", "NEUTRAL", "POSITIVE"}));
  EXPECT_EQ(bert->options.problem_type(), "");
  EXPECT_EQ(bert->options.task(), mha::HfTask::kSequenceClassification);
  const auto roberta =
      mha::load_hf_model(model_dir("roberta_sequence_classification")).as<mha::TextTaskModel>();
  EXPECT_EQ(roberta->options.problem_type(), "multi_label_classification");
  const auto tagger =
      mha::load_hf_model(model_dir("electra_token_classification")).as<mha::TextTaskModel>();
  EXPECT_EQ(tagger->options.id2label(),
            (std::vector<std::string>{"O", "B-PER", "I-PER", "B-LOC", "I-LOC"}));
  // No id2label in the file (question answering): transformers' LABEL_0, LABEL_1.
  const auto qa = mha::load_hf_model(model_dir("bert_question_answering")).as<mha::TextTaskModel>();
  EXPECT_EQ(qa->options.id2label(), (std::vector<std::string>{"LABEL_0", "LABEL_1"}));
  const auto birds =
      mha::load_hf_model(model_dir("vit_image_classification")).as<mha::ImageClassifier>();
  EXPECT_EQ(birds->options.id2label(),
            (std::vector<std::string>{"sparrow", "robin", "wren", "finch"}));
  std::ostringstream printed;
  bert->pretty_print(printed);
  EXPECT_EQ(printed.str(),
            "mha::TextTaskModel(model_type=bert, task=ForSequenceClassification, num_labels=3)");
}

TEST(TaskModel, UnusedWeightsAreNamedInAWarning) {
  // A checkpoint with a head mha loads without: its base model, and a warning
  // naming the head's tensors, as transformers warns.
  mha::support::CollectedWarnings warnings;
  c10::WarningUtils::WarningHandlerGuard guard(&warnings);
  const auto model = mha::load_hf_model(model_dir("electra_small"));
  EXPECT_EQ(model.class_name(), "mha::TextEncoderModel");
  ASSERT_EQ(warnings.messages.size(), 1u);
  EXPECT_NE(warnings.messages[0].find("were not used when initializing mha::TextEncoderModel: "
                                      "discriminator_predictions.dense.bias"),
            std::string::npos)
      << warnings.messages[0];
  warnings.messages.clear();
  mha::load_hf_model(model_dir("bert_token_classification"));
  EXPECT_TRUE(warnings.messages.empty());
}

// ~~~ Seq2seq LMs: model(input_ids, attention_mask, decoder_input_ids).logits ~~~

struct Seq2SeqLMParity : ::testing::TestWithParam<std::string> {};

TEST_P(Seq2SeqLMParity, TeacherForcedLogitsAndCachedSteps) {
  torch::NoGradGuard no_grad;
  auto ref = reference(GetParam());
  auto model = mha::load_hf_model(model_dir(GetParam())).as<mha::Seq2SeqLM>();
  const Tensor& ids = ref.at("input_ids");
  const Tensor& mask = ref.at("attention_mask");
  const Tensor& decoder_ids = ref.at("decoder_input_ids");
  const Tensor memory = model->encode(ids, mask);  // (N, S, E)
  expect_close_at_real(GetParam() + " encoder_last_hidden_state", memory,
                       ref.at("encoder_last_hidden_state"), mask);
  const Tensor logits = model(ids, mask, decoder_ids);  // (N, T, V)
  if (ref.count("logits")) {
    EXPECT_TRUE(tensors_close(logits, ref.at("logits"), 0.0, kAtol));
    std::printf("%s: logits max abs diff %.3g\n", GetParam().c_str(),
                max_abs_diff(logits, ref.at("logits")));
  }
  // The prepacked head adds final_logits_bias in its GEMM: the same sum, bit for bit.
  const Tensor hidden = ref.at("decoder_last_hidden_state");  // (N, T, E)
  EXPECT_TRUE(torch::equal(model->logits(hidden),
                           mha::linear(*model->lm_head, hidden) + model->final_logits_bias));
  // One decoder position at a time through the cache: the teacher-forced logits.
  auto cache = model->make_cache();
  std::vector<Tensor> steps;
  for (int64_t t = 0; t < decoder_ids.size(1); ++t) {
    steps.push_back(
        model->decode_cached(decoder_ids.narrow(1, t, 1), t == 0 ? memory : Tensor(), cache, mask));
  }
  EXPECT_TRUE(tensors_close(torch::cat(steps, 1), logits, 0.0, kAtol));
}

/// Logits of a paged step of `model`: `rows0` and `rows1` (decoder tokens) of
/// sequences a and b, with their `memory` rows on their first step.
struct Seq2SeqPagedSteps {
  mha::Seq2SeqLM model;
  mha::PagedStackCache self, memories;
  int64_t a, b;

  explicit Seq2SeqPagedSteps(mha::Seq2SeqLM m)
      : model(std::move(m)),
        self(model->make_paged_cache(mha::PagedKVCacheOptions(16, 4))),
        memories(model->make_paged_memory_cache(mha::PagedKVCacheOptions(16, 4))),
        a(self.add_sequence()),
        b(self.add_sequence()) {
    EXPECT_EQ(memories.add_sequence(), a);  // the same ids in both tables
    EXPECT_EQ(memories.add_sequence(), b);
  }
  /// (n0 + n1, V), or with `last_rows_only` (2, V).
  Tensor step(const Tensor& rows0,
              const Tensor& rows1,
              const Tensor& memory0 = {},
              const Tensor& memory1 = {},
              bool last_rows_only = false) {
    const int64_t n0 = rows0.size(0), n1 = rows1.size(0);
    const Tensor memory = memory0.defined() ? torch::cat({memory0, memory1}) : Tensor();
    const Tensor memory_offsets =
        memory0.defined()
            ? torch::tensor({int64_t{0}, memory0.size(0), memory0.size(0) + memory1.size(0)})
            : Tensor();
    return model->forward_paged(torch::cat({rows0, rows1}), memory, self, memories, {a, b},
                                torch::tensor({int64_t{0}, n0, n0 + n1}), memory_offsets,
                                last_rows_only);
  }
};

TEST_P(Seq2SeqLMParity, PagedStepsGiveEachSequencesLogits) {
  torch::NoGradGuard no_grad;
  auto ref = reference(GetParam());
  auto model = mha::load_hf_model(model_dir(GetParam())).as<mha::Seq2SeqLM>();
  const Tensor& ids = ref.at("input_ids");  // (2, 6), row 1 right-padded to 3 tokens
  const Tensor& mask = ref.at("attention_mask");
  const Tensor& decoder_ids = ref.at("decoder_input_ids");  // (2, 5)
  // transformers' logits where the reference has them, else the teacher-forced forward's.
  const Tensor expected =
      ref.count("logits") ? ref.at("logits") : model(ids, mask, decoder_ids);  // (2, 5, V)
  const Tensor memory = model->encode(ids, mask);                              // (2, 6, E)
  // Each source's real positions as memory rows: (6, E) and (3, E).
  const Tensor memory0 = memory[0].index_select(0, mask[0].nonzero().squeeze(1));
  const Tensor memory1 = memory[1].index_select(0, mask[1].nonzero().squeeze(1));
  Seq2SeqPagedSteps paged(model), last(model);
  auto rows = [&](int64_t row, int64_t begin, int64_t count) {
    return decoder_ids[row].narrow(0, begin, count);  // (count)
  };
  // Decoder prompts of 3 and 1 tokens with the memories; one token each; then 1 and 3.
  const std::vector<std::array<int64_t, 4>> steps{{0, 3, 0, 1}, {3, 1, 1, 1}, {4, 1, 2, 3}};
  std::vector<Tensor> got0, got1;
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto [b0, n0, b1, n1] = steps[i];
    const Tensor m0 = i == 0 ? memory0 : Tensor(), m1 = i == 0 ? memory1 : Tensor();
    const Tensor logits = paged.step(rows(0, b0, n0), rows(1, b1, n1), m0, m1);  // (n0 + n1, V)
    got0.push_back(logits.narrow(0, 0, n0));
    got1.push_back(logits.narrow(0, n0, n1));
    // Only the last rows' logits: those rows of the full step's.
    const Tensor ends = torch::tensor({n0 - 1, n0 + n1 - 1});
    EXPECT_TRUE(tensors_close(last.step(rows(0, b0, n0), rows(1, b1, n1), m0, m1, true),
                              logits.index_select(0, ends), 0.0, kAtol));
  }
  EXPECT_TRUE(tensors_close(torch::cat(got0), expected[0], 0.0, kAtol));
  EXPECT_TRUE(tensors_close(torch::cat(got1), expected[1], 0.0, kAtol));
}

INSTANTIATE_TEST_SUITE_P(Models,
                         Seq2SeqLMParity,
                         ::testing::Values("bart",
                                           "mbart",
                                           "bart_lm",
                                           "mbart_lm",
                                           "marian",
                                           "marian_served",
                                           "marian_untied",
                                           "bart_untied",
                                           "mbart_untied"));

// ~~~ Causal LMs: model(input_ids, attention_mask, position_ids).logits, left padding ~~~

struct CausalLMParity : ::testing::TestWithParam<std::string> {};

TEST_P(CausalLMParity, LogitsWithLeftPadding) {
  torch::NoGradGuard no_grad;
  auto ref = reference(GetParam());
  auto model = mha::load_hf_model(model_dir(GetParam())).as<mha::CausalLM>();
  const Tensor& ids = ref.at("input_ids");
  const Tensor& mask = ref.at("attention_mask");
  expect_close_at_real(GetParam() + " logits", model(ids, mask, ref.at("position_ids")),
                       ref.at("logits"), mask);
  expect_close_at_real(GetParam() + " last_hidden_state",
                       model->hidden_states(ids, mask, ref.at("position_ids")),
                       ref.at("last_hidden_state"), mask);
  // As close to the float64 model's as transformers' own float32 logits.
  expect_close_at_real(GetParam() + " logits against float64",
                       model(ids, mask, ref.at("position_ids")).to(torch::kDouble),
                       ref.at("logits_float64"), mask);
  // Without position_ids: the family's own (gpt2 0.., opt from the mask).
  expect_close_at_real(GetParam() + " logits, default positions", model(ids, mask),
                       ref.at("logits_default_positions"), mask);
}

TEST_P(CausalLMParity, CachedStepsEqualTheFullForward) {
  torch::NoGradGuard no_grad;
  auto ref = reference(GetParam());
  auto model = mha::load_hf_model(model_dir(GetParam())).as<mha::CausalLM>();
  const Tensor& ids = ref.at("input_ids");  // (2, 7), row 1 left-padded
  const Tensor& mask = ref.at("attention_mask");
  const Tensor& positions = ref.at("position_ids");
  const Tensor full = model(ids, mask, positions);  // (2, 7, V)
  auto cache = model->make_cache();
  const int64_t prompt = 4;
  std::vector<Tensor> parts{model->forward_cached(
      ids.narrow(1, 0, prompt), cache, mask.narrow(1, 0, prompt), positions.narrow(1, 0, prompt))};
  for (int64_t t = prompt; t < ids.size(1); ++t) {
    parts.push_back(model->forward_cached(ids.narrow(1, t, 1), cache, mask.narrow(1, 0, t + 1),
                                          positions.narrow(1, t, 1)));
  }
  const Tensor cached = torch::cat(parts, 1);
  EXPECT_FALSE(cached.isnan().any().item<bool>());
  expect_close_at_real(GetParam() + " cached vs forward", cached, full, mask);
}

TEST_P(CausalLMParity, PagedStepsEqualEachSequenceAlone) {
  torch::NoGradGuard no_grad;
  auto ref = reference(GetParam());
  auto model = mha::load_hf_model(model_dir(GetParam())).as<mha::CausalLM>();
  const Tensor row0 = ref.at("input_ids")[0];                  // 7 tokens
  const Tensor row1 = ref.at("input_ids")[1].narrow(0, 3, 4);  // its 4 real tokens
  auto cache = model->make_paged_cache(mha::PagedKVCacheOptions(16, 4));
  const int64_t a = cache.add_sequence(), b = cache.add_sequence();
  // Prompts: 5 tokens of row 0, 2 of row 1; then row 0's last two and row 1's last two, one a step.
  std::vector<Tensor> got0, got1;
  auto step = [&](const Tensor& x0, const Tensor& x1) {
    const auto n0 = x0.size(0);
    const auto logits = model->forward_paged(torch::cat({x0, x1}), cache, {a, b},
                                             torch::tensor({int64_t{0}, n0, n0 + x1.size(0)}));
    got0.push_back(logits.narrow(0, 0, n0));
    got1.push_back(logits.narrow(0, n0, x1.size(0)));
  };
  step(row0.narrow(0, 0, 5), row1.narrow(0, 0, 2));
  step(row0.narrow(0, 5, 1), row1.narrow(0, 2, 1));
  step(row0.narrow(0, 6, 1), row1.narrow(0, 3, 1));
  const Tensor alone0 = model(row0.unsqueeze(0)).squeeze(0);  // (7, V)
  EXPECT_TRUE(tensors_close(torch::cat(got0), alone0, 0.0, kAtol));
  // Only each sequence's last row: the logits a decoding step samples from.
  auto last = model->make_paged_cache(mha::PagedKVCacheOptions(16, 4));
  const int64_t c = last.add_sequence(), d = last.add_sequence();
  const Tensor last_rows = model->forward_paged(torch::cat({row0, row1}), last, {c, d},
                                                torch::tensor({0, 7, 11}), Tensor(), true);
  EXPECT_TRUE(tensors_close(last_rows, torch::stack({alone0[6], got1.back()[0]}), 0.0, kAtol));
  // transformers' logits of row 1 alone, unpadded.
  EXPECT_TRUE(
      tensors_close(torch::cat(got1), ref.at("prompt_logits_unpadded").squeeze(0), 0.0, kAtol));
}

INSTANTIATE_TEST_SUITE_P(
    Models,
    CausalLMParity,
    ::testing::Values("gpt2", "gpt2_legacy", "gpt2_served", "opt", "opt_350m"));

// ~~~ What a LibTorch user does with the module ~~~

TEST(HfModel, EntryPointNamesTheClass) {
  for (const auto& [name, cls] :
       std::vector<std::pair<std::string, std::string>>{{"bert", "TextEncoderModel"},
                                                        {"electra_small", "TextEncoderModel"},
                                                        {"vit", "VisionEncoderModel"},
                                                        {"marian", "Seq2SeqLM"},
                                                        {"opt_350m", "CausalLM"}}) {
    const auto model = mha::load_hf_model(model_dir(name));
    EXPECT_EQ(mha::hf_model_class(model.model_type), cls) << name;
    EXPECT_FALSE(model.base().is_training()) << name;
  }
  EXPECT_EQ(mha::hf_model_types().size(), 11u);
  MHA_ASSERT_THROWS_WITH(mha::load_hf_model(model_dir("gpt2")).as<mha::Seq2SeqLM>(),
                         "model_type 'gpt2' is a mha::CausalLM, not the class asked for");
}

/// `directory` loaded with the float tensors as read (not prepacked).
mha::HfModel load_float(const std::string& directory) {
  return mha::load_hf_model(directory, mha::HfModelLoadOptions().prepack(false));
}

TEST(HfModel, UntiedSeq2SeqEmbedsEachStackWithItsOwnMatrix) {
  // tie_word_embeddings false: transformers 5.23 ties nothing, and the file's
  // shared, encoder.embed_tokens, decoder.embed_tokens and lm_head differ.
  for (const std::string name : {"marian_untied", "bart_untied", "mbart_untied"}) {
    SCOPED_TRACE(name);
    const auto file = mha::read_hf_checkpoint(model_dir(name)).tensors;
    auto model = load_float(model_dir(name)).as<mha::Seq2SeqLM>();
    ASSERT_TRUE(model->decoder_embed_tokens);
    EXPECT_TRUE(torch::equal(model->shared->weight, file.at("model.encoder.embed_tokens.weight")));
    EXPECT_TRUE(torch::equal(model->decoder_embed_tokens->weight,
                             file.at("model.decoder.embed_tokens.weight")));
    EXPECT_TRUE(torch::equal(model->lm_head->weight, file.at("lm_head.weight")));
    EXPECT_FALSE(
        torch::equal(file.at("model.shared.weight"), file.at("model.encoder.embed_tokens.weight")));
    // Untied through clone, as loaded.
    auto copy = std::dynamic_pointer_cast<mha::Seq2SeqLMImpl>(model->clone());
    EXPECT_NE(copy->lm_head->weight.data_ptr(), copy->shared->weight.data_ptr());
    EXPECT_TRUE(
        torch::equal(copy->decoder_embed_tokens->weight, model->decoder_embed_tokens->weight));
  }
  // Tied (the default): one matrix, no decoder table of its own.
  EXPECT_FALSE(load_float(model_dir("marian")).as<mha::Seq2SeqLM>()->decoder_embed_tokens);
}

TEST(HfModel, TiedHeadIsOneCopyThroughCloneToAndLoad) {
  torch::NoGradGuard no_grad;
  auto model = load_float(model_dir("gpt2")).as<mha::CausalLM>();
  auto shares = [](const mha::CausalLM& m) {
    return m->lm_head->weight.data_ptr() == m->embed_tokens->weight.data_ptr();
  };
  EXPECT_TRUE(shares(model));
  const auto names = model->named_parameters();
  EXPECT_TRUE(names.contains("lm_head.weight") && names.contains("embed_tokens.weight"));
  const Tensor ids = torch::tensor({{5, 9, 17, 3}});
  const Tensor logits = model(ids);

  auto copy = std::dynamic_pointer_cast<mha::CausalLMImpl>(model->clone());
  EXPECT_TRUE(shares(mha::CausalLM(copy)));
  EXPECT_TRUE(torch::equal(copy->forward(ids), logits));

  std::stringstream archive;
  torch::save(model, archive);
  auto loaded = load_float(model_dir("gpt2")).as<mha::CausalLM>();
  loaded->embed_tokens->weight.zero_();
  torch::load(loaded, archive);
  EXPECT_TRUE(shares(loaded));
  EXPECT_TRUE(torch::equal(loaded(ids), logits));

  copy->to(torch::kFloat64);
  EXPECT_TRUE(shares(mha::CausalLM(copy)));
  EXPECT_TRUE(tensors_close(copy->forward(ids).to(torch::kFloat32), logits, 0.0, kAtol));
}

TEST(HfModel, LoadedModelsArePrepackedByDefaultAndConvertFromTheFloatValues) {
  torch::NoGradGuard no_grad;
  auto ref = reference("gpt2");
  const Tensor& ids = ref.at("input_ids");
  const Tensor& mask = ref.at("attention_mask");
  const Tensor& positions = ref.at("position_ids");
  auto fast = mha::load_hf_model(model_dir("gpt2")).as<mha::CausalLM>();
  auto plain = load_float(model_dir("gpt2")).as<mha::CausalLM>();
  EXPECT_TRUE(mha::is_prepacked(*fast));
  EXPECT_FALSE(mha::is_prepacked(*plain));
  const Tensor logits = fast(ids, mask, positions);
  expect_close_at_real("gpt2 as loaded (prepacked)", logits, ref.at("logits"), mask);
  // The float values come back bit for bit: state_dict, quantize_dynamic, unpack.
  const auto plain_list = mha::state_dict(*plain);
  const std::map<std::string, Tensor> plain_state(plain_list.begin(), plain_list.end());
  EXPECT_EQ(mha::state_dict(*fast).size(), plain_state.size());
  for (const auto& [name, value] : mha::state_dict(*fast)) {
    EXPECT_TRUE(torch::equal(value, plain_state.at(name))) << name;
  }
  auto fast_int8 = std::dynamic_pointer_cast<mha::CausalLMImpl>(fast->clone());
  auto plain_int8 = std::dynamic_pointer_cast<mha::CausalLMImpl>(plain->clone());
  mha::quantize_dynamic(*fast_int8);
  mha::quantize_dynamic(*plain_int8);
  EXPECT_FALSE(mha::is_prepacked(*fast_int8));
  EXPECT_TRUE(torch::equal(fast_int8->forward(ids, mask, positions),
                           plain_int8->forward(ids, mask, positions)));
  auto unpacked = std::dynamic_pointer_cast<mha::CausalLMImpl>(fast->clone());
  mha::unpack(*unpacked);
  EXPECT_FALSE(mha::is_prepacked(*unpacked));
  EXPECT_TRUE(torch::equal(unpacked->forward(ids, mask, positions), plain(ids, mask, positions)));
  // to() another dtype unpacks first; the head is tied to the embeddings again.
  fast->to(torch::kFloat64);
  EXPECT_FALSE(mha::is_prepacked(*fast));
  EXPECT_EQ(fast->lm_head->weight.data_ptr(), fast->embed_tokens->weight.data_ptr());
  expect_close_at_real("gpt2 prepacked, then to(float64)",
                       fast(ids, mask, positions).to(torch::kFloat32), ref.at("logits"), mask);
}

TEST(HfModel, EncodersConvertFromTheirPrepackedDefault) {
  torch::NoGradGuard no_grad;
  auto ref = reference("bert");
  auto model = mha::load_hf_model(model_dir("bert")).as<mha::TextEncoderModel>();
  EXPECT_TRUE(mha::is_prepacked(*model));
  model->to(torch::kFloat64);
  EXPECT_FALSE(mha::is_prepacked(*model));
  const Tensor& mask = ref.at("attention_mask");
  const Tensor types = ref.count("token_type_ids") ? ref.at("token_type_ids") : Tensor();
  const Tensor out = model(ref.at("input_ids"), mask, types).last_hidden_state;
  expect_close_at_real("bert prepacked, then to(float64)", out.to(torch::kFloat32),
                       ref.at("last_hidden_state"), mask);
  EXPECT_TRUE(mha::is_prepacked(mha::load_hf_model(model_dir("vit")).base()));
  EXPECT_FALSE(mha::is_prepacked(
      mha::load_hf_model(model_dir("bert"), mha::HfModelLoadOptions().dtype(torch::kFloat64))
          .base()));
}

TEST(HfModel, PrepackedAndInt8ModelsKeepTheEmbeddingLookup) {
  torch::NoGradGuard no_grad;
  auto ref = reference("opt");
  auto model = mha::load_hf_model(model_dir("opt")).as<mha::CausalLM>();
  const Tensor& ids = ref.at("input_ids");
  const Tensor& mask = ref.at("attention_mask");
  const Tensor& positions = ref.at("position_ids");
  const Tensor table = model->embed_tokens->weight.clone();

  auto packed = std::dynamic_pointer_cast<mha::CausalLMImpl>(model->clone());
  mha::prepack(*packed);
  EXPECT_TRUE(mha::is_prepacked(*packed));
  // The head holds its packed form; the embedding keeps its float table.
  EXPECT_EQ(packed->lm_head->weight.numel(), 0);
  EXPECT_TRUE(torch::equal(packed->embed_tokens->weight, table));
  expect_close_at_real("opt prepacked logits", packed->forward(ids, mask, positions),
                       ref.at("logits"), mask);

  auto int8 = std::dynamic_pointer_cast<mha::CausalLMImpl>(model->clone());
  mha::quantize_dynamic(*int8);
  EXPECT_TRUE(mha::is_quantized(*int8));
  EXPECT_TRUE(torch::equal(int8->embed_tokens->weight, table));
  const Tensor q = int8->forward(ids, mask, positions);
  EXPECT_EQ(q.sizes(), ref.at("logits").sizes());
  EXPECT_FALSE(real(q, mask).isnan().any().item<bool>());

  // A clone of a prepacked model computes the same.
  auto packed_copy = std::dynamic_pointer_cast<mha::CausalLMImpl>(packed->clone());
  EXPECT_TRUE(torch::equal(packed_copy->forward(ids, mask, positions),
                           packed->forward(ids, mask, positions)));
}

TEST(HfModel, Float16CheckpointLoadsAsFloat32UnlessAsked) {
  auto model = mha::load_hf_model(model_dir("bert_float16")).as<mha::TextEncoderModel>();
  EXPECT_EQ(model->word_embeddings->weight.scalar_type(), torch::kFloat32);
  auto f64 = mha::load_hf_model(model_dir("bert_float16"),
                                mha::HfModelLoadOptions().dtype(torch::kFloat64))
                 .as<mha::TextEncoderModel>();
  EXPECT_EQ(f64->encoder->layers[0]
                ->as<mha::TransformerEncoderLayerImpl>()
                ->linear1->weight.scalar_type(),
            torch::kFloat64);
}

// ~~~ Errors ~~~

TEST(HfModelErrors, TokenIdsOutsideTheVocabulary) {
  torch::NoGradGuard no_grad;
  auto gpt2 = mha::load_hf_model(model_dir("gpt2")).as<mha::CausalLM>();
  MHA_ASSERT_THROWS_WITH(gpt2(torch::tensor({{5, 99}})),
                         "input_ids: token id 99 at flat index 1 is outside the vocabulary: "
                         "expected ids in [0, 99) (vocab_size 99)");
  auto bert = mha::load_hf_model(model_dir("bert")).as<mha::TextEncoderModel>();
  MHA_ASSERT_THROWS_WITH(bert(torch::tensor({{-1, 4}})), "input_ids: token id -1");
}

TEST(HfModelErrors, AFailedStepLeavesTheCachesAsTheyWere) {
  torch::NoGradGuard no_grad;
  auto opt = mha::load_hf_model(model_dir("opt")).as<mha::CausalLM>();
  auto cache = opt->make_cache();
  opt->forward_cached(torch::tensor({{5, 9, 17}}), cache);
  MHA_ASSERT_THROWS_WITH(opt->forward_cached(torch::tensor({{120}}), cache),
                         "input_ids: token id 120");
  MHA_ASSERT_THROWS_WITH(opt->forward_cached(torch::tensor({{4}}), cache, torch::ones({1, 2})),
                         "attention_mask: expected shape (1, 4)");
  for (int64_t i = 0; i < cache.num_layers(); ++i) EXPECT_EQ(cache.layer(i).length(), 3);
  auto paged = opt->make_paged_cache(mha::PagedKVCacheOptions(8, 4));
  const int64_t id = paged.add_sequence();
  const int64_t free = paged.num_free_blocks();
  MHA_ASSERT_THROWS_WITH(
      opt->forward_paged(torch::tensor({5, 99}), paged, {id}, torch::tensor({0, 2})),
      "input_ids: token id 99");
  // Only the last rows of a step in which a sequence has none: nothing to sample from.
  const int64_t none = paged.add_sequence();
  MHA_ASSERT_THROWS_WITH(opt->forward_paged(torch::tensor({5, 9}), paged, {id, none},
                                            torch::tensor({0, 2, 2}), Tensor(), true),
                         "last_rows_only: expected every sequence to have new rows");
  EXPECT_EQ(paged.length(id), 0);
  EXPECT_EQ(paged.num_free_blocks(), free);
  // The cache still continues the sequence as before.
  EXPECT_TRUE(tensors_close(opt->forward_cached(torch::tensor({{4}}), cache).squeeze(1),
                            opt(torch::tensor({{5, 9, 17, 4}})).select(1, 3), 0.0, kAtol));
}

TEST(HfModelErrors, InputsLongerThanThePositionTable) {
  torch::NoGradGuard no_grad;
  auto gpt2 = mha::load_hf_model(model_dir("gpt2")).as<mha::CausalLM>();
  MHA_ASSERT_THROWS_WITH(gpt2(torch::ones({1, 33}, torch::kLong)),
                         "position 32 is beyond the position table: expected positions in [0, 32) "
                         "(max_position_embeddings 32)");
  auto bert = mha::load_hf_model(model_dir("bert")).as<mha::TextEncoderModel>();
  MHA_ASSERT_THROWS_WITH(bert(torch::ones({1, 40}, torch::kLong)), "(max_position_embeddings 32)");
}

TEST(HfModelErrors, UnsupportedModelTypeAndGpt2Options) {
  auto checkpoint = mha::read_hf_checkpoint(model_dir("gpt2"));
  checkpoint.model_type = "llama";
  MHA_ASSERT_THROWS_WITH(mha::load_hf_model(checkpoint),
                         "model_type 'llama' is not supported by load_hf_model; supported: bart, "
                         "bert, deit, distilbert, electra, gpt2, marian, mbart, opt, roberta, vit");
  checkpoint = mha::read_hf_checkpoint(model_dir("gpt2"));
  checkpoint.config = mha::HfConfig::parse(
      R"({"model_type": "gpt2", "n_embd": 32, "n_head": 4, "n_layer": 2, "n_positions": 32,
          "vocab_size": 99, "scale_attn_by_inverse_layer_idx": true})",
      "config.json");
  MHA_ASSERT_THROWS_WITH(mha::load_hf_model(checkpoint),
                         "config.json: scale_attn_by_inverse_layer_idx true is not supported by "
                         "mha's GPT-2; expected false (transformers' default)");
}

TEST(HfModelErrors, UnsupportedHeadsAndHeadShapes) {
  auto checkpoint = mha::read_hf_checkpoint(model_dir("bert_sequence_classification"));
  std::ifstream file(model_dir("bert_sequence_classification") + "/config.json");
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const std::string head = "BertForSequenceClassification";
  text.replace(text.find(head), head.size(), "BertForMultipleChoice");
  checkpoint.config = mha::HfConfig::parse(text, "config.json");
  MHA_ASSERT_THROWS_WITH(
      mha::load_hf_model(checkpoint),
      "config.json: architectures 'BertForMultipleChoice' is not supported by load_hf_model for "
      "model_type 'bert'; supported: the base model (...Model, ...ForMaskedLM, "
      "...ForPreTraining), ...ForSequenceClassification, ...ForTokenClassification, "
      "...ForQuestionAnswering");
  checkpoint = mha::read_hf_checkpoint(model_dir("roberta_token_classification"));
  checkpoint.tensors.erase("classifier.bias");
  MHA_ASSERT_THROWS_WITH(mha::load_hf_model(checkpoint), "missing key 'classifier.bias'");
  checkpoint = mha::read_hf_checkpoint(model_dir("distilbert_sequence_classification"));
  checkpoint.tensors["classifier.weight"] = torch::zeros({7, 32});  // 3 labels in its config
  MHA_ASSERT_THROWS_WITH(mha::load_hf_model(checkpoint), "classifier.weight");
  MHA_ASSERT_THROWS_WITH(
      mha::TextTaskModel(mha::TextTaskModelOptions(
          mha::TextEncoderModelOptions("bert", mha::TransformerEncoderLayerOptions(32, 4), 1),
          mha::HfTask::kSequenceClassification, 3)),
      "BERT's sequence classification reads the pooler's output");
}

TEST(HfModelErrors, MissingKeyNamesKeyAndFile) {
  auto checkpoint = mha::read_hf_checkpoint(model_dir("opt"));
  checkpoint.tensors.erase("model.decoder.embed_positions.weight");
  MHA_ASSERT_THROWS_WITH(mha::load_hf_model(checkpoint),
                         "opt/model.safetensors: missing key 'decoder.embed_positions.weight' (for "
                         "embed_positions.weight)");
}

}  // namespace
