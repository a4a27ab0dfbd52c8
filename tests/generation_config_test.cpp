// mha::read_generation_config against transformers: each directory written by
// scripts/export_generation_reference.py at test time (config.json only,
// generation_config.json as opus-mt and bart-large-cnn publish them, a
// sampling config) gives the fields transformers loads, defaults included;
// the refused ones fail with the fragment of transformers' wording (or mha's,
// for a field it does not implement) that the script wrote.

#include <mha/generation_config.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "file_bytes.h"
#include "support.h"

namespace {

using json = nlohmann::json;

const std::filesystem::path kDir = MHA_GENERATION_REFERENCE_DIR;

json read_json(const std::filesystem::path& path) {
  std::ifstream file(path);
  return json::parse(file);
}

std::string text_of(const std::filesystem::path& path) {
  const std::vector<char> bytes = mha::support::read_file_bytes(path.string());
  return {bytes.begin(), bytes.end()};
}

template <typename T>
json optional_json(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

/// `config` as the reference writes it.
json as_json(const mha::GenerationConfig& c) {
  static const char* const kEarly[] = {"false", "true", "never"};
  return {{"max_length", optional_json(c.max_length())},
          {"max_new_tokens", optional_json(c.max_new_tokens())},
          {"min_length", c.min_length()},
          {"min_new_tokens", optional_json(c.min_new_tokens())},
          {"do_sample", c.do_sample()},
          {"num_beams", c.num_beams()},
          {"num_return_sequences", c.num_return_sequences()},
          {"length_penalty", c.length_penalty()},
          {"early_stopping", kEarly[static_cast<int>(c.early_stopping())]},
          {"temperature", c.temperature()},
          {"top_k", c.top_k()},
          {"top_p", c.top_p()},
          {"repetition_penalty", c.repetition_penalty()},
          {"no_repeat_ngram_size", c.no_repeat_ngram_size()},
          {"bad_words_ids", c.bad_words_ids()},
          {"forced_bos_token_id", optional_json(c.forced_bos_token_id())},
          {"forced_eos_token_id", c.forced_eos_token_id()},
          {"suppress_tokens", c.suppress_tokens()},
          {"begin_suppress_tokens", c.begin_suppress_tokens()},
          {"renormalize_logits", c.renormalize_logits()},
          {"eos_token_id", c.eos_token_id()},
          {"pad_token_id", optional_json(c.pad_token_id())},
          {"bos_token_id", optional_json(c.bos_token_id())},
          {"decoder_start_token_id", optional_json(c.decoder_start_token_id())},
          {"stop_strings", c.stop_strings()}};
}

TEST(GenerationConfig, ReadsWhatTransformersLoadsFromEachDirectory) {
  int compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kDir)) {
    if (!std::filesystem::exists(entry.path() / "expected.json")) continue;
    SCOPED_TRACE(entry.path().filename().string());
    const json expected = read_json(entry.path() / "expected.json");
    const json got = as_json(mha::read_generation_config(entry.path().string()));
    for (const auto& [field, value] : expected.items()) {
      EXPECT_EQ(got.at(field), value) << field;
    }
    ++compared;
  }
  EXPECT_EQ(compared, 7);
}

TEST(GenerationConfig, RefusesWhatTransformersRefusesAndWhatMhaDoesNotImplement) {
  int refused = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kDir)) {
    if (!std::filesystem::exists(entry.path() / "error.txt")) continue;
    SCOPED_TRACE(entry.path().filename().string());
    const std::string fragment = text_of(entry.path() / "error.txt");
    MHA_ASSERT_THROWS_WITH(mha::read_generation_config(entry.path().string()), fragment);
    ++refused;
  }
  EXPECT_EQ(refused, 6);
}

TEST(GenerationConfig, DefaultsAreTransformersAndValidateChecksOverrides) {
  const mha::GenerationConfig defaults;
  EXPECT_FALSE(defaults.max_length().has_value());  // 20 new tokens, as transformers' default
  EXPECT_EQ(defaults.top_k(), 50);
  EXPECT_NO_THROW(defaults.validate());
  MHA_ASSERT_THROWS_WITH(mha::GenerationConfig().do_sample(true).top_p(-0.5).validate(),
                         "`top_p` has to be a float > 0 and < 1, but is -0.5");
  MHA_ASSERT_THROWS_WITH(mha::GenerationConfig().repetition_penalty(0.0).validate(),
                         "`penalty` has to be a strictly positive float, but is 0.0");
  MHA_ASSERT_THROWS_WITH(mha::GenerationConfig().do_sample(true).top_k(-1).validate(),
                         "`top_k` has to be a strictly positive integer, but is -1");
  MHA_ASSERT_THROWS_WITH(mha::read_generation_config((kDir / "no_such_directory").string()),
                         "no_such_directory");
}

}  // namespace
