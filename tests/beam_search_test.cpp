// Beam search in mha::generate against transformers' `generate` on the
// random-weight models scripts/export_hf_reference.py writes at test time
// (the seq2seq marian, marian_served, bart_generate and mbart_generate, the
// decoder-only gpt2, gpt2_served, opt and opt_350m), with 4 beams: length
// penalty 1 and 2, early stopping false, true and "never", no repeated 3-gram
// with two sequences returned and a two-token bad word, and beam sampling;
// the same sequences and transformers' `sequences_scores`. The reference's
// smallest margin at a boundary where beam search ranks candidates must be
// above float32 rounding of the logits for the token check to mean something.

#include <mha/generation.h>
#include <mha/hf_models.h>

#include <algorithm>
#include <string>

#include "hf_reference.h"

namespace {

const auto model_dir = mha::test::hf_model_dir;
const auto reference = mha::test::hf_reference;
using mha::test::expect_margin_means_something;

using torch::Tensor;

class Seq2SeqBeamSearch : public ::testing::TestWithParam<std::string> {};
class CausalBeamSearch : public ::testing::TestWithParam<std::string> {};

/// The directory's config with the reference's 4-beam `setting`.
mha::GenerationConfig beams(const std::string& name,
                            const std::string& setting,
                            const std::map<std::string, Tensor>& values) {
  mha::GenerationConfig config = mha::read_generation_config(model_dir(name)).num_beams(4);
  if (setting == "lp1")
    return config.length_penalty(1.0).early_stopping(mha::EarlyStopping::kFalse);
  if (setting == "lp2_early") {
    return config.length_penalty(2.0).early_stopping(mha::EarlyStopping::kTrue);
  }
  if (setting == "never") return config.early_stopping(mha::EarlyStopping::kNever);
  if (setting == "ngram3_ret2") {
    auto words = config.bad_words_ids();
    const Tensor word = values.at("beam_bad_word");
    words.push_back({word[0].item<int64_t>(), word[1].item<int64_t>()});
    return config.no_repeat_ngram_size(3).num_return_sequences(2).bad_words_ids(words);
  }
  return config.do_sample(true).temperature(0.7).top_k(50);  // sample_0: seed 0
}

/// Every beam search reference of `name`: the same sequences as
/// transformers, and its `sequences_scores` within the rounding of a sum of
/// up to 16 log-probabilities (each within 1.7e-6 with the logits: 1e-5).
template <typename Model>
void expect_beams_equal(const std::string& name) {
  const auto values = reference(name);
  auto model = mha::load_hf_model(model_dir(name)).as<Model>();
  double largest_difference = 0;
  for (const std::string setting : {"lp1", "lp2_early", "never", "ngram3_ret2", "sample_0"}) {
    SCOPED_TRACE(setting);
    torch::manual_seed(0);
    const mha::GenerateOutput out = mha::generate_with_scores(
        model, values.at("input_ids"), values.at("attention_mask"), beams(name, setting, values));
    const Tensor expected = values.at("beam_" + setting);
    EXPECT_TRUE(torch::equal(out.sequences, expected)) << out.sequences << "\n" << expected;
    const Tensor scores = values.at("beam_" + setting + "_scores");
    EXPECT_TRUE(torch::allclose(out.sequences_scores, scores, /*rtol=*/0, /*atol=*/1e-5))
        << out.sequences_scores << "\n"
        << scores;
    largest_difference =
        std::max(largest_difference, (out.sequences_scores - scores).abs().max().item<double>());
  }
  ::testing::Test::RecordProperty("largest_score_difference",
                                  ::testing::PrintToString(largest_difference));
  expect_margin_means_something(values, "beam_margin", 1e-4);
}

TEST_P(Seq2SeqBeamSearch, IsTransformersTokenForToken) {
  expect_beams_equal<mha::Seq2SeqLM>(GetParam());
}

TEST_P(CausalBeamSearch, IsTransformersTokenForToken) {
  expect_beams_equal<mha::CausalLM>(GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Families,
    Seq2SeqBeamSearch,
    ::testing::Values("marian", "marian_served", "bart_generate", "mbart_generate"));

INSTANTIATE_TEST_SUITE_P(Families,
                         CausalBeamSearch,
                         ::testing::Values("gpt2", "gpt2_served", "opt", "opt_350m"));

}  // namespace
