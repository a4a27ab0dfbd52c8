// mha::Tokenizer (mha/tokenizer.h) against transformers' AutoTokenizer on the
// directories scripts/export_tokenizer_reference.py writes at test time
// (CTest fixture tokenizer_reference), trained on Debian's fortune files
// (English, German, Russian, Chinese, Spanish, Czech): byte-level BPEs saved
// as GPT2Tokenizer saves them (the defaults; a prefix space, bos, a pad token
// and left padding) and as RobertaTokenizer does, WordPieces saved as
// BertTokenizer saves them (uncased; cased with transformers' clean-up of
// decoded spaces) and one run from tokenizer.json under the generic class;
// a Llama-2-style byte-fallback BPE as LlamaTokenizer saves it, a Qwen2-style
// one as Qwen2Tokenizer does, and under the generic class a Llama-3-style
// (Split + ByteLevel, ignore_merges) and two that use the other components
// (Unicode forms, Replace, Strip, Whitespace, Punctuation, Digits, Metaspace,
// an end-of-word suffix, a continuing-subword prefix, their decoders), and a
// Unigram (T5's and XLM-R's kind of model), one behind SentencePiece's
// compiled normalization rules (Precompiled); and directories without
// tokenizer.json: BERT's vocab.txt, GPT-2's vocab.json and merges.txt.
// On 10,000 corpus lines and the edge cases (empty, whitespace runs, tabs and
// newlines, a 5,000-character word, special tokens in the text, emoji,
// combining marks, accents, İ and final sigma): ids, pairs, truncation (every
// strategy), decoded text with and without special tokens, padded batches
// (to the longest and to max_length), streamed text, bytes that are not
// UTF-8 decoded with U+FFFD, StopStringCriteria's answers; then the errors.

#include <gtest/gtest.h>
#include <mha/generation.h>
#include <mha/hf_models.h>
#include <mha/stopping_criteria.h>
#include <mha/tokenizer.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support.h"

namespace {

using nlohmann::json;
using Ids = std::vector<int64_t>;

std::string family_dir(const std::string& family) {
  return std::string(MHA_TOKENIZER_REFERENCE_DIR) + "/" + family;
}

/// transformers' outputs for `family` (mha_reference.json), read once.
const json& reference(const std::string& family) {
  static std::map<std::string, json> read;  // gtest runs the tests on one thread
  auto found = read.find(family);
  if (found == read.end()) {
    std::ifstream in(family_dir(family) + "/mha_reference.json");
    EXPECT_TRUE(in.good()) << "run scripts/export_tokenizer_reference.py";
    found = read.emplace(family, json::parse(in)).first;
  }
  return found->second;
}

/// `family`'s tokenizer, loaded once (its methods are const).
const mha::Tokenizer& tokenizer_of(const std::string& family) {
  static std::map<std::string, mha::Tokenizer> loaded;  // gtest runs the tests on one thread
  auto found = loaded.find(family);
  if (found == loaded.end()) {
    found = loaded.emplace(family, mha::load_hf_tokenizer(family_dir(family))).first;
  }
  return found->second;
}

#if defined(__SANITIZE_ADDRESS__)
// Under AddressSanitizer (a build for memory errors, many times slower) every
// 10th line of the 10,000 and every 10th streamed case; the release suite
// compares them all.
constexpr size_t kLineStep = 10;
#else
constexpr size_t kLineStep = 1;
#endif

/// Every kLineStep-th element of `list` (all of them in the release suite).
template <typename T>
std::vector<T> sampled(const json& list) {
  std::vector<T> out;
  for (size_t i = 0; i < list.size(); i += kLineStep) out.push_back(list[i].get<T>());
  return out;
}

struct TokenizerParity : ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerParity, IdsOfEveryLineAreTransformers) {
  const json& ref = reference(GetParam());
  const mha::Tokenizer& tokenizer = tokenizer_of(GetParam());
  EXPECT_EQ(tokenizer.tokenizer_class(), ref.at("class").get<std::string>());
  const json& lines = ref.at("lines");
  ASSERT_GE(lines.size(), 10000u);
  size_t differ = 0;
  for (size_t i = 0; i < lines.size(); i += kLineStep) {
    const auto line = lines[i].get<std::string>();
    const Ids expected = ref.at("ids")[i].get<Ids>();
    if (tokenizer.encode(line) != expected && ++differ <= 5) {
      ADD_FAILURE() << "line " << i << " (" << line.substr(0, 80) << "): ids differ";
    }
  }
  EXPECT_EQ(differ, 0u) << "of " << lines.size() << " lines";
  // All (sampled) lines in one call, on the threads.
  const auto each = tokenizer.encode_each(sampled<std::string>(lines));
  EXPECT_TRUE(each == sampled<Ids>(ref.at("ids")));
}

using Offsets = std::vector<std::pair<int64_t, int64_t>>;

/// transformers' offset_mapping (a list of [begin, end] lists).
Offsets offsets_of(const json& mapping) {
  Offsets out;
  for (const json& pair : mapping)
    out.emplace_back(pair.at(0).get<int64_t>(), pair.at(1).get<int64_t>());
  return out;
}

TEST_P(TokenizerParity, OffsetsOfEveryLineAreTransformers) {
  const json& ref = reference(GetParam());
  const mha::Tokenizer& tokenizer = tokenizer_of(GetParam());
  const json& lines = ref.at("lines");
  size_t differ = 0;
  for (size_t i = 0; i < lines.size(); i += kLineStep) {
    const auto line = lines[i].get<std::string>();
    const mha::EncodedText got = tokenizer.encode_with_offsets(line);
    const bool same = got.input_ids == ref.at("ids")[i].get<Ids>() &&
                      got.offset_mapping == offsets_of(ref.at("offsets")[i]);
    if (!same && ++differ <= 5) {
      ADD_FAILURE() << "line " << i << " (" << line.substr(0, 80) << "): offsets differ";
    }
  }
  EXPECT_EQ(differ, 0u) << "of " << lines.size() << " lines";
  for (size_t i = 0; i < ref.at("pair_offsets").size(); ++i) {
    const mha::EncodedText got = tokenizer.encode_with_offsets(lines[2 * i].get<std::string>(),
                                                               lines[2 * i + 1].get<std::string>());
    EXPECT_EQ(got.offset_mapping, offsets_of(ref.at("pair_offsets")[i])) << "pair " << i;
  }
  const size_t edge = ref.at("truncated_offsets").size() - 300;  // the edge cases, the last lines
  for (size_t i = 0; i < ref.at("truncated_offsets").size(); ++i) {
    const size_t line = i < 300 ? i : lines.size() - edge + (i - 300);
    const mha::EncodedText got = tokenizer.encode_with_offsets(
        lines[line].get<std::string>(), std::nullopt,
        mha::EncodeOptions().truncation(mha::Truncation::kLongestFirst).max_length(12));
    EXPECT_EQ(got.input_ids, ref.at("truncated")[i].get<Ids>()) << "line " << line;
    EXPECT_EQ(got.offset_mapping, offsets_of(ref.at("truncated_offsets")[i])) << "line " << line;
  }
}

TEST_P(TokenizerParity, DecodedTextIsTransformers) {
  const json& ref = reference(GetParam());
  const mha::Tokenizer& tokenizer = tokenizer_of(GetParam());
  size_t differ = 0;
  for (size_t i = 0; i < ref.at("ids").size(); i += kLineStep) {
    const Ids ids = ref.at("ids")[i].get<Ids>();
    const bool same = tokenizer.decode(ids) == ref.at("decoded")[i].get<std::string>() &&
                      tokenizer.decode(ids, /*skip_special_tokens=*/true) ==
                          ref.at("decoded_skip")[i].get<std::string>();
    if (!same && ++differ <= 5) ADD_FAILURE() << "line " << i << ": decoded text differs";
  }
  EXPECT_EQ(differ, 0u);
  // All (sampled) sequences in one call, on the threads.
  EXPECT_TRUE(tokenizer.batch_decode(sampled<Ids>(ref.at("ids"))) ==
              sampled<std::string>(ref.at("decoded")));
  // Byte tokens that are not UTF-8: U+FFFD for each maximal invalid part.
  for (size_t i = 0; i < ref.at("lossy_ids").size(); ++i) {
    EXPECT_EQ(tokenizer.decode(ref.at("lossy_ids")[i].get<Ids>()),
              ref.at("lossy_decoded")[i].get<std::string>())
        << "lossy case " << i;
  }
}

TEST_P(TokenizerParity, PairsAreTransformers) {
  const json& ref = reference(GetParam());
  const mha::Tokenizer& tokenizer = tokenizer_of(GetParam());
  const json& lines = ref.at("lines");
  for (size_t i = 0; i < ref.at("pair_ids").size(); ++i) {
    const auto a = lines[2 * i].get<std::string>(), b = lines[2 * i + 1].get<std::string>();
    EXPECT_EQ(tokenizer.encode_pair(a, b), ref.at("pair_ids")[i].get<Ids>()) << "pair " << i;
    EXPECT_EQ(tokenizer.encode_with_offsets(a, b).token_type_ids,
              ref.at("pair_type_ids")[i].get<Ids>())
        << "pair " << i;
  }
  // Without special tokens: the text's ids of type 0, the pair's of type 1.
  const auto plain = mha::EncodeOptions().add_special_tokens(false);
  for (size_t i = 0; i < ref.at("pair_type_ids_plain").size(); ++i) {
    const auto a = lines[2 * i].get<std::string>(), b = lines[2 * i + 1].get<std::string>();
    EXPECT_EQ(tokenizer.encode_with_offsets(a, b, plain).token_type_ids,
              ref.at("pair_type_ids_plain")[i].get<Ids>())
        << "pair " << i;
  }
}

TEST_P(TokenizerParity, WordIdsAreTransformers) {
  const json& ref = reference(GetParam());
  const mha::Tokenizer& tokenizer = tokenizer_of(GetParam());
  const json& lines = ref.at("lines");
  const json& words = ref.at("word_ids");
  const size_t edge = words.size() - 300;  // the first 300 lines, then the edge cases (the last)
  for (size_t i = 0; i < words.size(); ++i) {
    const size_t line = i < 300 ? i : lines.size() - edge + (i - 300);
    EXPECT_EQ(tokenizer.encode_with_offsets(lines[line].get<std::string>()).word_ids,
              words[i].get<Ids>())
        << "line " << line;
  }
  for (size_t i = 0; i < ref.at("pair_word_ids").size(); ++i) {
    EXPECT_EQ(tokenizer
                  .encode_with_offsets(lines[2 * i].get<std::string>(),
                                       lines[2 * i + 1].get<std::string>())
                  .word_ids,
              ref.at("pair_word_ids")[i].get<Ids>())
        << "pair " << i;
  }
}

TEST_P(TokenizerParity, TruncationIsTransformers) {
  const json& ref = reference(GetParam());
  const mha::Tokenizer& tokenizer = tokenizer_of(GetParam());
  const json& lines = ref.at("lines");
  const size_t edge = ref.at("truncated").size() - 300;  // the edge cases, the last lines
  for (size_t i = 0; i < ref.at("truncated").size(); ++i) {
    const size_t line = i < 300 ? i : lines.size() - edge + (i - 300);
    EXPECT_EQ(tokenizer.encode(
                  lines[line].get<std::string>(),
                  mha::EncodeOptions().truncation(mha::Truncation::kLongestFirst).max_length(12)),
              ref.at("truncated")[i].get<Ids>())
        << "line " << line;
  }
  const std::pair<const char*, mha::Truncation> strategies[] = {
      {"pair_longest_first", mha::Truncation::kLongestFirst},
      {"pair_only_first", mha::Truncation::kOnlyFirst},
      {"pair_only_second", mha::Truncation::kOnlySecond}};
  for (const auto& [key, strategy] : strategies) {
    for (size_t i = 0; i < ref.at(key).size(); ++i) {
      const auto options = mha::EncodeOptions().truncation(strategy).max_length(16);
      const std::string a = lines[2 * i].get<std::string>(),
                        b = lines[2 * i + 1].get<std::string>();
      if (ref.at(key)[i].is_null()) {
        MHA_ASSERT_THROWS_WITH(tokenizer.encode_pair(a, b, options),
                               "Sequence to truncate too short to respect the provided max_length");
      } else {
        EXPECT_EQ(tokenizer.encode_pair(a, b, options), ref.at(key)[i].get<Ids>())
            << key << " " << i;
      }
    }
  }
}

TEST_P(TokenizerParity, OverflowingWindowsAreTransformers) {
  const json& ref = reference(GetParam());
  const mha::Tokenizer& tokenizer = tokenizer_of(GetParam());
  const json& lines = ref.at("lines");
  const size_t edge = ref.at("overflow").size() - 100;  // the edge cases, the last lines
  for (size_t i = 0; i < ref.at("overflow").size(); ++i) {
    const size_t line = i < 100 ? i : lines.size() - edge + (i - 100);
    const auto options =
        mha::EncodeOptions().truncation(mha::Truncation::kLongestFirst).max_length(12).stride(4);
    EXPECT_EQ(tokenizer.encode_overflowing(lines[line].get<std::string>(), std::nullopt, options),
              ref.at("overflow")[i].get<std::vector<Ids>>())
        << "line " << line;
  }
  const std::pair<const char*, mha::Truncation> strategies[] = {
      {"overflow_longest_first", mha::Truncation::kLongestFirst},
      {"overflow_only_first", mha::Truncation::kOnlyFirst},
      {"overflow_only_second", mha::Truncation::kOnlySecond}};
  for (const auto& [key, strategy] : strategies) {
    for (size_t i = 0; i < ref.at(key).size(); ++i) {
      const auto options = mha::EncodeOptions().truncation(strategy).max_length(20).stride(2);
      const std::string a = lines[2 * i].get<std::string>(),
                        b = lines[2 * i + 1].get<std::string>();
      if (ref.at(key)[i].is_null()) {  // tokenizers panics; mha raises
        EXPECT_THROW(tokenizer.encode_overflowing(a, b, options), c10::Error) << key << " " << i;
      } else {
        EXPECT_EQ(tokenizer.encode_overflowing(a, b, options),
                  ref.at(key)[i].get<std::vector<Ids>>())
            << key << " " << i;
      }
    }
  }
}

TEST_P(TokenizerParity, OverflowingWindowsOffsetsAreTransformers) {
  const json& ref = reference(GetParam());
  const mha::Tokenizer& tokenizer = tokenizer_of(GetParam());
  const json& lines = ref.at("lines");
  const auto options =
      mha::EncodeOptions().truncation(mha::Truncation::kOnlySecond).max_length(20).stride(2);
  for (size_t i = 0; i < ref.at("overflow_windows").size(); ++i) {
    const json& expected = ref.at("overflow_windows")[i];
    const std::string a = lines[2 * i].get<std::string>(), b = lines[2 * i + 1].get<std::string>();
    if (expected.is_null()) {
      EXPECT_THROW(tokenizer.encode_overflowing_with_offsets(a, b, options), c10::Error) << i;
      continue;
    }
    const auto windows = tokenizer.encode_overflowing_with_offsets(a, b, options);
    ASSERT_EQ(windows.size(), expected.at("offsets").size()) << "pair " << i;
    const auto ids = tokenizer.encode_overflowing(a, b, options);
    for (size_t w = 0; w < windows.size(); ++w) {
      EXPECT_EQ(windows[w].input_ids, ids[w]) << "pair " << i << " window " << w;
      EXPECT_EQ(windows[w].offset_mapping, offsets_of(expected.at("offsets")[w]))
          << "pair " << i << " window " << w;
      EXPECT_EQ(windows[w].sequence_ids, expected.at("sequence_ids")[w].get<Ids>())
          << "pair " << i << " window " << w;
      EXPECT_EQ(windows[w].token_type_ids, expected.at("type_ids")[w].get<Ids>())
          << "pair " << i << " window " << w;
    }
  }
}

TEST_P(TokenizerParity, PaddedBatchIsTransformers) {
  const json& ref = reference(GetParam());
  const mha::Tokenizer& tokenizer = tokenizer_of(GetParam());
  std::vector<std::string> texts;
  for (size_t i = 0; i < 8; ++i) texts.push_back(ref.at("lines")[i].get<std::string>());
  if (ref.contains("batch_error")) {
    MHA_ASSERT_THROWS_WITH(tokenizer.encode_batch(texts),
                           "Asking to pad but the tokenizer does not have a padding token");
    return;
  }
  const mha::TokenizedBatch batch =
      tokenizer.encode_batch(texts, mha::EncodeOptions().return_offsets_mapping(true));
  const auto& expected = ref.at("batch");
  for (int64_t i = 0; i < 8; ++i) {
    const torch::Tensor ids = batch.input_ids[i].contiguous(), mask = batch.attention_mask[i];
    EXPECT_EQ(Ids(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel()),
              expected.at("input_ids")[i].get<Ids>());
    EXPECT_EQ(Ids(mask.data_ptr<int64_t>(), mask.data_ptr<int64_t>() + mask.numel()),
              expected.at("attention_mask")[i].get<Ids>());
    Offsets offsets;  // (L, 2) as pairs
    for (int64_t t = 0; t < batch.offset_mapping.size(1); ++t) {
      offsets.emplace_back(batch.offset_mapping[i][t][0].item<int64_t>(),
                           batch.offset_mapping[i][t][1].item<int64_t>());
    }
    EXPECT_EQ(offsets, offsets_of(expected.at("offset_mapping")[i])) << "row " << i;
  }
  EXPECT_FALSE(tokenizer.encode_batch(texts).offset_mapping.defined());
  const auto decoded = tokenizer.batch_decode(batch.input_ids, /*skip_special_tokens=*/true);
  EXPECT_EQ(decoded[0], tokenizer.decode(tokenizer.encode(texts[0]), true));
  // padding="max_length", truncation=True, max_length=24.
  const mha::TokenizedBatch fixed =
      tokenizer.encode_batch(texts, mha::EncodeOptions()
                                        .truncation(mha::Truncation::kLongestFirst)
                                        .max_length(24)
                                        .pad_to_max_length(true));
  ASSERT_EQ(fixed.input_ids.size(1), 24);
  for (int64_t i = 0; i < 8; ++i) {
    const torch::Tensor ids = fixed.input_ids[i].contiguous(), mask = fixed.attention_mask[i];
    EXPECT_EQ(Ids(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel()),
              ref.at("batch_max_length").at("input_ids")[i].get<Ids>());
    EXPECT_EQ(Ids(mask.data_ptr<int64_t>(), mask.data_ptr<int64_t>() + mask.numel()),
              ref.at("batch_max_length").at("attention_mask")[i].get<Ids>());
  }
}

TEST_P(TokenizerParity, StreamedPiecesJoinToTransformersText) {
  const json& ref = reference(GetParam());
  const mha::Tokenizer& tokenizer = tokenizer_of(GetParam());
  const std::string replacement = "\xEF\xBF\xBD";  // U+FFFD
  // The corpus's first 300 lines, the edge cases, and the byte tokens that are not UTF-8.
  std::vector<std::pair<Ids, std::string>> cases;
  const size_t lines = ref.at("ids").size();
  for (size_t i = 0; i < lines; ++i) {
    if (i >= 300 && i + 20 < lines) continue;  // the edge cases are the last lines
    cases.emplace_back(ref.at("ids")[i].get<Ids>(), ref.at("decoded")[i].get<std::string>());
  }
  for (size_t i = 0; i < ref.at("lossy_ids").size(); ++i) {
    cases.emplace_back(ref.at("lossy_ids")[i].get<Ids>(),
                       ref.at("lossy_decoded")[i].get<std::string>());
  }
  std::set<int64_t> byte_tokens;  // <0x00> ... <0xFF> where the vocabulary has them
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    if (const auto id = tokenizer.token_to_id(name)) byte_tokens.insert(*id);
  }
  for (const auto& [ids, expected] : cases) {
    mha::DecodeStream stream(tokenizer);
    std::string joined;
    for (const int64_t id : ids) {
      const std::string piece = stream.push(id);
      // A piece never ends inside a character that later tokens complete.
      EXPECT_TRUE(piece.size() < 3 || piece.compare(piece.size() - 3, 3, replacement) != 0 ||
                  expected.find(replacement) != std::string::npos);
      joined += piece;
    }
    const std::string rest = stream.finish();
    // What a finished stream of UTF-8 text still held: at most the last
    // character, or a trailing run of byte tokens (their bytes may turn out
    // not UTF-8 until the run ends).
    size_t run = 0;
    while (run < ids.size() && byte_tokens.count(ids[ids.size() - 1 - run]) > 0) ++run;
    if (expected.find(replacement) == std::string::npos) {
      EXPECT_LE(rest.size(), 4 + run) << "held back: \"" << rest << "\"";
    }
    joined += rest;
    EXPECT_EQ(joined, expected);
  }
}

TEST_P(TokenizerParity, StopStringsStopWhereTransformersStops) {
  const json& ref = reference(GetParam());
  const mha::Tokenizer& tokenizer = tokenizer_of(GetParam());
  const auto stop_strings = ref.at("stop_strings").get<std::vector<std::string>>();
  if (ref.contains("stop_error")) {
    MHA_ASSERT_THROWS_WITH(mha::StopStringCriteria(tokenizer, stop_strings),
                           "unable to identify tokens matching");
    return;
  }
  const mha::StopStringCriteria criteria(tokenizer, stop_strings);
  size_t stops = 0;
  for (const json& c : ref.at("stop_cases")) {
    const Ids ids = c.at("ids").get<Ids>();
    const torch::Tensor row = torch::tensor(ids, torch::kLong).unsqueeze(0);  // (1, t)
    const bool stop = criteria(row, torch::Tensor())[0].item<bool>();
    EXPECT_EQ(stop, c.at("stop").get<bool>()) << ::testing::PrintToString(ids);
    stops += stop;
  }
  EXPECT_GT(stops, 0u) << "the cases should include sequences that end in a stop string";
}

INSTANTIATE_TEST_SUITE_P(Families,
                         TokenizerParity,
                         ::testing::Values("gpt2",
                                           "gpt2_left_bos",
                                           "roberta",
                                           "bart",
                                           "opt",
                                           "bert_uncased",
                                           "distilbert",
                                           "electra",
                                           "bert_cased",
                                           "word_piece_generic",
                                           "llama2",
                                           "llama2_spm",
                                           "llama3",
                                           "qwen2",
                                           "bpe_suffix_generic",
                                           "metaspace_generic",
                                           "unigram_generic",
                                           "unigram_precompiled",
                                           "bert_vocab_txt",
                                           "gpt2_vocab_merges"));

TEST(Tokenizer, ConcurrentEncodesGiveOneThreadsIds) {
  const json& ref = reference("gpt2");
  const mha::Tokenizer tokenizer = mha::load_hf_tokenizer(family_dir("gpt2"));
  std::vector<std::thread> threads;
  std::vector<size_t> differ(4, 0);
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < 2000; i += 4) {
        differ[t] +=
            tokenizer.encode(ref.at("lines")[i].get<std::string>()) != ref.at("ids")[i].get<Ids>();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(differ, std::vector<size_t>(4, 0));
}

TEST(TokenizerErrors, TextThatIsNotUtf8NamesTheByteOffset) {
  const mha::Tokenizer tokenizer = mha::load_hf_tokenizer(family_dir("gpt2"));
  MHA_ASSERT_THROWS_WITH(tokenizer.encode("ok \xe2\x82"),
                         "text: expected UTF-8 text, but the bytes at offset 3 are not");
  MHA_ASSERT_THROWS_WITH(tokenizer.encode_pair("fine", "\xc0\x80"), "pair: expected UTF-8 text");
  MHA_ASSERT_THROWS_WITH(tokenizer.encode_batch({"a", "b\xff"}), "texts[1]: expected UTF-8");
}

TEST(TokenizerErrors, DecodeRefusesAnIdOutsideTheVocabulary) {
  const mha::Tokenizer tokenizer = mha::load_hf_tokenizer(family_dir("gpt2"));
  MHA_ASSERT_THROWS_WITH(tokenizer.decode({5, tokenizer.size()}),
                         "decode: token id 3000 at index 1 is outside the vocabulary: expected "
                         "ids in [0, 3000)");
}

/// A copy of the gpt2 directory in a fresh folder, `edit` applied to its
/// tokenizer.json (or the file replaced by `text` when given), its
/// tokenizer_config.json naming `tokenizer_class`.
std::string edited_copy(const std::string& name,
                        const std::function<void(json&)>& edit,
                        const std::string& text = "",
                        const std::string& tokenizer_class = "GPT2Tokenizer") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("mha_tokenizer_" + name);
  fs::create_directories(dir);
  std::ifstream config_in(family_dir("gpt2") + "/tokenizer_config.json");
  json config = json::parse(config_in);
  config["tokenizer_class"] = tokenizer_class;
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
  std::ifstream in(family_dir("gpt2") + "/tokenizer.json");
  json tokenizer = json::parse(in);
  edit(tokenizer);
  std::ofstream(dir / "tokenizer.json") << (text.empty() ? tokenizer.dump() : text);
  return dir.string();
}

TEST(TokenizerErrors, MissingMalformedAndUnsupportedFilesAreNamed) {
  MHA_ASSERT_THROWS_WITH(mha::load_hf_tokenizer("/nonexistent/dir"),
                         "/nonexistent/dir/tokenizer.json (a tokenizer directory holds "
                         "tokenizer.json; or, for BertTokenizer, vocab.txt");
  const std::string truncated = edited_copy("truncated", [](json&) {}, "{\"version\": \"1.0\", ");
  MHA_ASSERT_THROWS_WITH(mha::load_hf_tokenizer(truncated), "tokenizer.json is not valid JSON");
  const std::string bad_merge = edited_copy(
      "bad_merge", [](json& t) { t["model"]["merges"][0] = json::array({"nowhere", "tobeseen"}); });
  MHA_ASSERT_THROWS_WITH(mha::load_hf_tokenizer(bad_merge),
                         "merge 0 ('nowhere', 'tobeseen') names a token that is not in the "
                         "vocabulary");
  const std::string word_level = edited_copy(
      "word_level", [](json& t) { t["model"]["type"] = "WordLevel"; }, "", "TokenizersBackend");
  MHA_ASSERT_THROWS_WITH(
      mha::load_hf_tokenizer(word_level),
      "tokenizer.json's model is 'WordLevel'; supported: BPE, WordPiece, Unigram");
  const std::string nmt = edited_copy(
      "nmt", [](json& t) { t["normalizer"] = {{"type", "Nmt"}}; }, "", "TokenizersBackend");
  MHA_ASSERT_THROWS_WITH(mha::load_hf_tokenizer(nmt),
                         "normalizer 'Nmt' is not supported yet; supported: "
                         "BertNormalizer, NFC, NFD, NFKC, NFKD");
  const auto charsmap = [](const std::string& base64) {
    return [base64](json& t) {
      t["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", base64}};
    };
  };
  MHA_ASSERT_THROWS_WITH(mha::load_hf_tokenizer(edited_copy("charsmap_b64", charsmap("@@@@"), "",
                                                            "TokenizersBackend")),
                         "Precompiled's precompiled_charsmap: '@' at 0 is not base64");
  MHA_ASSERT_THROWS_WITH(mha::load_hf_tokenizer(edited_copy("charsmap_fit", charsmap("/wAAAA=="),
                                                            "", "TokenizersBackend")),
                         "the charsmap's trie of 255 bytes does not fit its 4 bytes");
  const std::string bad_regex = edited_copy(
      "bad_regex",
      [](json& t) {
        t["pre_tokenizer"] = {
            {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
      },
      "", "TokenizersBackend");
  MHA_ASSERT_THROWS_WITH(mha::load_hf_tokenizer(bad_regex),
                         "the pattern '(unclosed' does not compile at offset 9");
  const std::string bad_behavior = edited_copy(
      "bad_behavior",
      [](json& t) {
        t["pre_tokenizer"] = {
            {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Sideways"}};
      },
      "", "TokenizersBackend");
  MHA_ASSERT_THROWS_WITH(mha::load_hf_tokenizer(bad_behavior),
                         "split behavior 'Sideways' is not one of Removed, Isolated");
  const std::string marian = edited_copy("marian", [](json&) {}, "", "MarianTokenizer");
  MHA_ASSERT_THROWS_WITH(mha::load_hf_tokenizer(marian),
                         "tokenizer_class 'MarianTokenizer' is not supported yet");
}

TEST(StopStrings, GenerateStopsWhereTransformersStops) {
  // transformers' generate(stop_strings=[...], tokenizer=...) on the small GPT-2.
  std::ifstream in(family_dir("gpt2") + "/generated_stop.json");
  const json ref = json::parse(in);
  const mha::Tokenizer tokenizer = mha::load_hf_tokenizer(family_dir("gpt2"));
  mha::CausalLM model = mha::load_hf_model(family_dir("gpt2")).as<mha::CausalLM>();
  const Ids prompt = tokenizer.encode(ref.at("prompt").get<std::string>());
  const mha::StoppingCriteriaList criteria{std::make_shared<mha::StopStringCriteria>(
      tokenizer, ref.at("stop_strings").get<std::vector<std::string>>())};
  const torch::Tensor sequences =
      mha::generate(model, torch::tensor(prompt, torch::kLong).unsqueeze(0), {},
                    mha::GenerationConfig()
                        .max_new_tokens(ref.at("max_new_tokens").get<int64_t>())
                        .pad_token_id(0),
                    std::nullopt, {}, criteria);  // (1, L + T)
  EXPECT_EQ(Ids(sequences.data_ptr<int64_t>(), sequences.data_ptr<int64_t>() + sequences.numel()),
            ref.at("sequences")[0].get<Ids>());
  // The same stop strings as a config field, with the tokenizer passed to generate.
  const mha::GenerationConfig config =
      mha::GenerationConfig()
          .max_new_tokens(ref.at("max_new_tokens").get<int64_t>())
          .pad_token_id(0)
          .stop_strings(ref.at("stop_strings").get<std::vector<std::string>>());
  const torch::Tensor from_config =
      mha::generate(model, torch::tensor(prompt, torch::kLong).unsqueeze(0), {}, config,
                    std::nullopt, {}, {}, tokenizer);  // (1, L + T)
  EXPECT_TRUE(torch::equal(from_config, sequences));
  // Without the tokenizer: transformers' error.
  MHA_ASSERT_THROWS_WITH(
      mha::generate(model, torch::tensor(prompt, torch::kLong).unsqueeze(0), {}, config),
      "There are one or more stop strings, either in the arguments to `generate` or in the "
      "model's generation config, but we could not locate a tokenizer");
}

TEST(TokenizerErrors, StopStringsThatCannotStopAreRefused) {
  const mha::Tokenizer bert = mha::load_hf_tokenizer(family_dir("bert_uncased"));
  using Stops = std::vector<std::string>;
  MHA_ASSERT_THROWS_WITH(mha::StopStringCriteria(bert, Stops{}),
                         "expected at least one stop string, but got none");
  MHA_ASSERT_THROWS_WITH(mha::StopStringCriteria(bert, Stops{"end", ""}),
                         "expected non-empty stop strings");
  MHA_ASSERT_THROWS_WITH(mha::StopStringCriteria(bert, Stops{"\xff"}),
                         "a stop string: expected UTF-8 text");
  // No token of the WordPiece vocabulary has a snowman.
  MHA_ASSERT_THROWS_WITH(mha::StopStringCriteria(bert, Stops{"\xe2\x98\x83"}),
                         "unable to identify tokens matching one or more of the supplied stop");
  const mha::StopStringCriteria criteria(bert, Stops{"end"});
  MHA_ASSERT_THROWS_WITH(criteria(torch::zeros({2}, torch::kLong), torch::Tensor()),
                         "expected input_ids of shape (rows, t) int64, but got [2]");
}

}  // namespace
