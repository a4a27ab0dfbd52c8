#include "text/tokenizer_json.h"

#include <c10/util/Exception.h>

#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "text/bert_text.h"
#include "text/bpe.h"
#include "text/byte_level.h"
#include "text/decoders.h"
#include "text/normalizers.h"
#include "text/pre_tokenizers.h"
#include "text/precompiled.h"
#include "text/unicode_classes.h"
#include "text/unigram.h"
#include "text/utf8.h"
#include "text/word_piece.h"

namespace mha {
namespace detail {

namespace {

using nlohmann::json;

std::string type_of(const json& component) {
  return json_field<std::string>(component, "type", "");
}

/// A "pattern" field: {"String": text} or {"Regex": pattern}.
Pattern read_pattern(const json& pattern) {
  if (pattern.contains("Regex")) return Pattern(pattern.at("Regex").get<std::string>(), true);
  return Pattern(pattern.at("String").get<std::string>(), false);
}

/// The one character of `text` (Metaspace's replacement, Strip's content).
char32_t single_char(const std::string& text, const char* what) {
  check_utf8(text, what);
  size_t length = 0;
  const char32_t c = text.empty() ? 0 : code_point_at(text, 0, length);
  TORCH_CHECK_VALUE(!text.empty() && length == text.size(), "load_hf_tokenizer: ", what,
                    ": expected one character, but got '", text, "'");
  return c;
}

/// Metaspace's scheme: "prepend_scheme", or the older "add_prefix_space".
PrependScheme read_prepend_scheme(const json& metaspace) {
  if (metaspace.contains("prepend_scheme")) {
    return prepend_scheme(metaspace.at("prepend_scheme").get<std::string>());
  }
  return json_field<bool>(metaspace, "add_prefix_space", true) ? PrependScheme::kAlways
                                                               : PrependScheme::kNever;
}

/// A "Replace" normalizer or decoder: its `pattern` and `content`.
template <typename Replace>
std::unique_ptr<const Replace> read_replace(const json& replace) {
  return std::make_unique<Replace>(read_pattern(replace.at("pattern")),
                                   replace.at("content").get<std::string>());
}

/// Reads one component type's fields into its `Component`.
template <typename Component>
using ReadOne = std::function<std::unique_ptr<const Component>(const json&)>;

/// The types of `Component` mha reads, in the order its errors list them.
template <typename Component>
using TypeReaders = std::vector<std::pair<const char*, ReadOne<Component>>>;

/// `component` of `kind` read by its type's reader in `readers`; a
/// "Sequence" is its `list`, each item read by `read`, in a `SequenceOf`; any
/// other type is a `c10::Error` naming it and the supported ones.
template <typename SequenceOf, typename Component>
std::unique_ptr<const Component> read_typed(const json& component,
                                            const char* kind,
                                            const char* list,
                                            const TypeReaders<Component>& readers,
                                            std::unique_ptr<const Component> (*read)(const json&)) {
  const std::string type = type_of(component);
  for (const auto& [name, read_type] : readers) {
    if (type == name) return read_type(component);
  }
  std::string supported;
  for (const auto& reader : readers) supported += std::string(reader.first) + ", ";
  TORCH_CHECK_VALUE(type == "Sequence", "load_hf_tokenizer: tokenizer.json's ", kind, " '", type,
                    "' is not supported yet; supported: ", supported, "Sequence");
  std::vector<std::unique_ptr<const Component>> components;
  for (const json& item : component.at(list)) components.push_back(read(item));
  return std::make_unique<SequenceOf>(std::move(components));
}

}  // namespace

json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  TORCH_CHECK_VALUE(in.good(), "load_hf_tokenizer: expected ", path.string(),
                    " (a tokenizer directory holds tokenizer.json; or, for BertTokenizer, "
                    "vocab.txt; for GPT2Tokenizer and RobertaTokenizer, vocab.json and "
                    "merges.txt), but it cannot be read");
  json parsed;
  try {
    parsed = json::parse(in);
  } catch (const json::exception& e) {
    TORCH_CHECK_VALUE(false, "load_hf_tokenizer: ", path.string(),
                      " is not valid JSON: ", e.what());
  }
  return parsed;
}

std::vector<std::pair<std::string, std::string>> read_merges(const json& model) {
  std::vector<std::pair<std::string, std::string>> merges;
  for (const json& merge : model.value("merges", json::array())) {
    if (merge.is_array()) {
      merges.emplace_back(merge.at(0).get<std::string>(), merge.at(1).get<std::string>());
    } else {  // the older "left right" form
      const auto text = merge.get<std::string>();
      const size_t space = text.find(' ');
      TORCH_CHECK_VALUE(space != std::string::npos, "load_hf_tokenizer: merge '", text,
                        "' is not two tokens");
      merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    }
  }
  return merges;
}

std::unique_ptr<const Normalizer> read_normalizer(const json& normalizer) {
  if (normalizer.is_null()) return nullptr;
  static const TypeReaders<Normalizer> readers = {
      {"BertNormalizer",
       [](const json& n) {
         const bool lowercase = json_field<bool>(n, "lowercase", true);
         return std::make_unique<BertNormalizer>(json_field<bool>(n, "clean_text", true),
                                                 json_field<bool>(n, "handle_chinese_chars", true),
                                                 json_field<bool>(n, "strip_accents", lowercase),
                                                 lowercase);
       }},
      {"NFC",
       [](const json&) { return std::make_unique<UnicodeFormNormalizer>(UnicodeForm::kNFC); }},
      {"NFD",
       [](const json&) { return std::make_unique<UnicodeFormNormalizer>(UnicodeForm::kNFD); }},
      {"NFKC",
       [](const json&) { return std::make_unique<UnicodeFormNormalizer>(UnicodeForm::kNFKC); }},
      {"NFKD",
       [](const json&) { return std::make_unique<UnicodeFormNormalizer>(UnicodeForm::kNFKD); }},
      {"Lowercase", [](const json&) { return std::make_unique<LowercaseNormalizer>(); }},
      {"StripAccents", [](const json&) { return std::make_unique<StripAccentsNormalizer>(); }},
      {"Strip",
       [](const json& n) {
         return std::make_unique<StripNormalizer>(json_field<bool>(n, "strip_left", true),
                                                  json_field<bool>(n, "strip_right", true));
       }},
      {"Replace", read_replace<ReplaceNormalizer>},
      {"Prepend",
       [](const json& n) {
         return std::make_unique<PrependNormalizer>(n.at("prepend").get<std::string>());
       }},
      {"Precompiled", [](const json& n) -> std::unique_ptr<const Normalizer> {
         const std::string charsmap =
             base64_decode(json_field<std::string>(n, "precompiled_charsmap", ""),
                           "Precompiled's precompiled_charsmap");
         // An empty charsmap rewrites nothing (tokenizers leaves the text as it is).
         if (charsmap.empty()) {
           return std::make_unique<NormalizerSequence>(
               std::vector<std::unique_ptr<const Normalizer>>{});
         }
         return std::make_unique<PrecompiledNormalizer>(charsmap);
       }}};
  return read_typed<NormalizerSequence>(normalizer, "normalizer", "normalizers", readers,
                                        read_normalizer);
}

std::unique_ptr<const PreTokenizer> read_pre_tokenizer(const json& pre_tokenizer) {
  if (pre_tokenizer.is_null()) return nullptr;
  static const TypeReaders<PreTokenizer> readers = {
      {"BertPreTokenizer", [](const json&) { return std::make_unique<BertPreTokenizer>(); }},
      {"ByteLevel",
       [](const json& pre) {
         return std::make_unique<ByteLevelPreTokenizer>(
             json_field<bool>(pre, "add_prefix_space", true),
             json_field<bool>(pre, "use_regex", true));
       }},
      {"Split",
       [](const json& pre) {
         return std::make_unique<SplitPreTokenizer>(
             read_pattern(pre.at("pattern")), split_behavior(pre.at("behavior").get<std::string>()),
             json_field<bool>(pre, "invert", false));
       }},
      {"Whitespace", [](const json&) { return std::make_unique<WhitespacePreTokenizer>(); }},
      {"WhitespaceSplit",
       [](const json&) {
         return std::make_unique<CharClassPreTokenizer>(is_white_space, SplitBehavior::kRemoved);
       }},
      {"Metaspace",
       [](const json& pre) {
         return std::make_unique<MetaspacePreTokenizer>(
             json_field<std::string>(pre, "replacement", "\xE2\x96\x81"), read_prepend_scheme(pre),
             json_field<bool>(pre, "split", true));
       }},
      {"Punctuation",
       [](const json& pre) {
         return std::make_unique<CharClassPreTokenizer>(
             is_any_punctuation,
             split_behavior(json_field<std::string>(pre, "behavior", "Isolated")));
       }},
      {"Digits", [](const json& pre) {
         const bool each = json_field<bool>(pre, "individual_digits", false);
         return std::make_unique<CharClassPreTokenizer>(
             is_numeric, each ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
       }}};
  return read_typed<PreTokenizerSequence>(pre_tokenizer, "pre_tokenizer", "pretokenizers", readers,
                                          read_pre_tokenizer);
}

std::unique_ptr<const Decoder> read_decoder(const json& decoder) {
  if (decoder.is_null()) return std::make_unique<SpaceJoinDecoder>();
  static const TypeReaders<Decoder> readers = {
      {"ByteLevel", [](const json&) { return std::make_unique<ByteLevelDecoder>(); }},
      {"WordPiece",
       [](const json& decoder) {
         return std::make_unique<WordPieceDecoder>(json_field<std::string>(decoder, "prefix", "##"),
                                                   json_field<bool>(decoder, "cleanup", true));
       }},
      {"ByteFallback", [](const json&) { return std::make_unique<ByteFallbackDecoder>(); }},
      {"Fuse", [](const json&) { return std::make_unique<FuseDecoder>(); }},
      {"Strip",
       [](const json& decoder) {
         return std::make_unique<StripDecoder>(
             single_char(decoder.at("content").get<std::string>(), "Strip decoder's content"),
             json_field<size_t>(decoder, "start", 0), json_field<size_t>(decoder, "stop", 0));
       }},
      {"Replace", read_replace<ReplaceDecoder>},
      {"Metaspace",
       [](const json& decoder) {
         return std::make_unique<MetaspaceDecoder>(
             single_char(json_field<std::string>(decoder, "replacement", "\xE2\x96\x81"),
                         "Metaspace decoder's replacement"),
             read_prepend_scheme(decoder));
       }},
      {"BPEDecoder", [](const json& decoder) {
         return std::make_unique<BpeSuffixDecoder>(
             json_field<std::string>(decoder, "suffix", "</w>"));
       }}};
  return read_typed<DecoderSequence>(decoder, "decoder", "decoders", readers, read_decoder);
}

std::unique_ptr<const TokenModel> read_model(const json& model) {
  const std::string type = type_of(model);
  if (type == "WordPiece") {
    return std::make_unique<WordPiece>(
        model.at("vocab").get<std::unordered_map<std::string, int64_t>>(),
        json_field<std::string>(model, "unk_token", "[UNK]"),
        json_field<std::string>(model, "continuing_subword_prefix", "##"),
        json_field<int64_t>(model, "max_input_chars_per_word", 100));
  }
  if (type == "Unigram") {
    std::vector<std::pair<std::string, double>> pieces;
    for (const json& piece : model.at("vocab")) {
      pieces.emplace_back(piece.at(0).get<std::string>(), piece.at(1).get<double>());
    }
    std::optional<int64_t> unk_id;
    if (!model.value("unk_id", json()).is_null()) unk_id = model.at("unk_id").get<int64_t>();
    return std::make_unique<Unigram>(std::move(pieces), unk_id,
                                     json_field<bool>(model, "byte_fallback", false));
  }
  TORCH_CHECK_VALUE(type == "BPE", "load_hf_tokenizer: tokenizer.json's model is '", type,
                    "'; supported: BPE, WordPiece, Unigram");
  BpeOptions options;
  options.ignore_merges = json_field<bool>(model, "ignore_merges", false);
  if (!model.value("unk_token", json()).is_null()) {
    options.unk_token = model.at("unk_token").get<std::string>();
  }
  options.fuse_unk = json_field<bool>(model, "fuse_unk", false);
  options.byte_fallback = json_field<bool>(model, "byte_fallback", false);
  options.continuing_subword_prefix =
      json_field<std::string>(model, "continuing_subword_prefix", "");
  options.end_of_word_suffix = json_field<std::string>(model, "end_of_word_suffix", "");
  return std::make_unique<Bpe>(model.at("vocab").get<std::unordered_map<std::string, int64_t>>(),
                               read_merges(model), std::move(options));
}

}  // namespace detail
}  // namespace mha
