#include "text/tokenizer_files.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

namespace mha {
namespace detail {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

/// `path` parsed; `c10::Error` naming it when missing or not JSON.
json read_tokenizer_json(const fs::path& path) {
  std::ifstream in(path);
  TORCH_CHECK_VALUE(in.good(), "load_hf_tokenizer: expected ", path.string(),
                    " (a tokenizer directory holds tokenizer.json), but it cannot be read");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    TORCH_CHECK_VALUE(false, "load_hf_tokenizer: ", path.string(), " is not valid JSON: ", e.what());
  }
}

/// `value`'s field `key` as `T`, or `fallback` where absent or null.
template <typename T>
T json_field(const json& value, const char* key, T fallback) {
  const auto found = value.find(key);
  return found == value.end() || found->is_null() ? fallback : found->get<T>();
}

/// A special token of tokenizer_config.json: a string, an AddedToken's
/// fields, or null.
std::optional<std::string> special_token(const json& config, const char* key) {
  const auto found = config.find(key);
  if (found == config.end() || found->is_null()) return std::nullopt;
  if (found->is_string()) return found->get<std::string>();
  return found->at("content").get<std::string>();
}

/// tokenizer.json's "model": a BPE (the only model built yet).
Bpe read_model(const json& model, bool own_class_defaults) {
  const std::string type = json_field<std::string>(model, "type", "");
  TORCH_CHECK_VALUE(type == "BPE", "load_hf_tokenizer: tokenizer.json's model is '", type,
                    "'; supported: BPE");
  TORCH_CHECK_VALUE(json_field<std::string>(model, "continuing_subword_prefix", "").empty() &&
                        json_field<std::string>(model, "end_of_word_suffix", "").empty() &&
                        !json_field<bool>(model, "byte_fallback", false),
                    "load_hf_tokenizer: BPE's continuing_subword_prefix, end_of_word_suffix and "
                    "byte_fallback are not supported yet");
  std::vector<std::pair<std::string, std::string>> merges;
  for (const json& merge : model.at("merges")) {
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
  std::optional<std::string> unk;
  if (!own_class_defaults && !model.value("unk_token", json()).is_null()) {
    unk = model.at("unk_token").get<std::string>();
  }
  const bool ignore_merges = !own_class_defaults && json_field<bool>(model, "ignore_merges", false);
  return Bpe(model.at("vocab").get<std::unordered_map<std::string, int64_t>>(), merges,
             ignore_merges, unk);
}

/// tokenizer.json's "added_tokens", and the config's special tokens that
/// are not among them (transformers adds those, special, at their vocabulary
/// id or after the vocabulary).
std::vector<AddedToken> read_added(const json& tokenizer, const json& config, const Bpe& model) {
  std::vector<AddedToken> added;
  for (const json& t : tokenizer.value("added_tokens", json::array())) {
    TORCH_CHECK_VALUE(!json_field<bool>(t, "single_word", false),
                      "load_hf_tokenizer: added token '", t.at("content").get<std::string>(),
                      "' is single_word, which is not supported yet");
    added.push_back({t.at("content").get<std::string>(), t.at("id").get<int64_t>(),
                     json_field<bool>(t, "special", false), json_field<bool>(t, "lstrip", false),
                     json_field<bool>(t, "rstrip", false)});
  }
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                          "cls_token", "mask_token"}) {
    const auto content = special_token(config, key);
    if (!content) continue;
    bool known = false;
    for (const AddedToken& t : added) known = known || t.content == *content;
    if (known) continue;
    int64_t id = model.token_to_id(*content).value_or(-1);
    if (id < 0) {
      id = model.size();
      for (const AddedToken& t : added) id = std::max(id, t.id + 1);
    }
    added.push_back({*content, id, /*special=*/true, false, false});
  }
  return added;
}

/// A post-processor's template: tokenizer.json's TemplateProcessing (or none, or
/// ByteLevel's, which changes no id), in a Sequence or alone.
void read_post_processor(const json& processor, TemplateProcessing& out) {
  if (processor.is_null()) return;
  const std::string type = json_field<std::string>(processor, "type", "");
  if (type == "Sequence") {
    for (const json& p : processor.at("processors")) read_post_processor(p, out);
  } else if (type == "TemplateProcessing") {
    std::map<std::string, std::vector<int64_t>> specials;
    for (const auto& [name, token] : processor.at("special_tokens").items()) {
      specials[name] = token.at("ids").get<std::vector<int64_t>>();
    }
    auto pieces = [&](const json& list) {
      std::vector<TemplatePiece> result;
      for (const json& piece : list) {
        if (piece.contains("SpecialToken")) {
          const auto name = piece["SpecialToken"].at("id").get<std::string>();
          result.push_back({TemplatePiece::Kind::kSpecial, specials.at(name)});
        } else {
          const auto name = piece.at("Sequence").at("id").get<std::string>();
          result.push_back({name == "A" ? TemplatePiece::Kind::kSequenceA
                                        : TemplatePiece::Kind::kSequenceB,
                            {}});
        }
      }
      return result;
    };
    out.single = pieces(processor.at("single"));
    out.pair = pieces(processor.at("pair"));
  } else {
    TORCH_CHECK_VALUE(type == "ByteLevel", "load_hf_tokenizer: tokenizer.json's post_processor '",
                      type, "' is not supported yet; supported: TemplateProcessing, ByteLevel, "
                      "Sequence");
  }
}

/// transformers' `update_post_processor`: bos and eos around each sequence as
/// `add_bos_token` and `add_eos_token` say.
TemplateProcessing bos_eos_template(const json& config, const AddedTokens& added) {
  const auto bos = special_token(config, "bos_token"), eos = special_token(config, "eos_token");
  const bool add_bos = json_field<bool>(config, "add_bos_token", false) && bos.has_value();
  const bool add_eos = json_field<bool>(config, "add_eos_token", false) && eos.has_value();
  TemplateProcessing t;
  using Kind = TemplatePiece::Kind;
  const TemplatePiece bos_piece{Kind::kSpecial, {add_bos ? *added.id_of(*bos) : 0}};
  const TemplatePiece eos_piece{Kind::kSpecial, {add_eos ? *added.id_of(*eos) : 0}};
  t.single.clear();
  t.pair.clear();
  for (const Kind sequence : {Kind::kSequenceA, Kind::kSequenceB}) {
    std::vector<TemplatePiece> around;
    if (add_bos) around.push_back(bos_piece);
    around.push_back({sequence, {}});
    if (add_eos) around.push_back(eos_piece);
    if (sequence == Kind::kSequenceA) t.single = around;
    t.pair.insert(t.pair.end(), around.begin(), around.end());
  }
  return t;
}

/// The pre-tokenizer: GPT2Tokenizer's own (ByteLevel, the config's
/// add_prefix_space), else tokenizer.json's.
std::optional<ByteLevel> read_pre_tokenizer(const json& tokenizer, const json& config, bool gpt2) {
  if (gpt2) return ByteLevel(json_field<bool>(config, "add_prefix_space", false), true);
  const json pre = tokenizer.value("pre_tokenizer", json());
  if (pre.is_null()) return std::nullopt;
  const std::string type = json_field<std::string>(pre, "type", "");
  TORCH_CHECK_VALUE(type == "ByteLevel", "load_hf_tokenizer: tokenizer.json's pre_tokenizer '",
                    type, "' is not supported yet; supported: ByteLevel");
  return ByteLevel(json_field<bool>(pre, "add_prefix_space", true), json_field<bool>(pre, "use_regex", true));
}

/// Whether the decoder is ByteLevel (GPT2Tokenizer's own, or tokenizer.json's);
/// false: none (tokens joined with spaces).
bool read_byte_level_decoder(const json& tokenizer, bool gpt2) {
  const json decoder = tokenizer.value("decoder", json());
  if (gpt2) return true;
  if (decoder.is_null()) return false;
  const std::string type = json_field<std::string>(decoder, "type", "");
  TORCH_CHECK_VALUE(type == "ByteLevel", "load_hf_tokenizer: tokenizer.json's decoder '", type,
                    "' is not supported yet; supported: ByteLevel");
  return true;
}

/// The pipeline of the parsed files.
std::shared_ptr<const TokenizerPipeline> pipeline_of(const json& tokenizer, const json& config) {
  const std::string cls = json_field<std::string>(config, "tokenizer_class", "TokenizersBackend");
  // GPT2Tokenizer's __init__ builds its own pipeline around the file's
  // vocabulary and merges; the generic classes run the file's as written.
  const bool gpt2 = cls == "GPT2Tokenizer";
  TORCH_CHECK_VALUE(gpt2 || cls == "TokenizersBackend" || cls == "PreTrainedTokenizerFast",
                    "load_hf_tokenizer: tokenizer_class '", cls, "' is not supported yet; "
                    "supported: GPT2Tokenizer, TokenizersBackend, PreTrainedTokenizerFast");
  TORCH_CHECK_VALUE(gpt2 || tokenizer.value("normalizer", json()).is_null(),
                    "load_hf_tokenizer: tokenizer.json's normalizer is not supported yet");
  Bpe model = read_model(tokenizer.at("model"), gpt2);
  AddedTokens added(read_added(tokenizer, config, model));
  // transformers keeps the file's post-processor unless the config sets
  // add_bos_token or add_eos_token, or the file has none.
  const json processor = tokenizer.value("post_processor", json());
  TemplateProcessing post;
  read_post_processor(processor, post);
  if (config.contains("add_bos_token") || config.contains("add_eos_token") || processor.is_null()) {
    post = bos_eos_template(config, added);
  }
  std::optional<int64_t> pad;
  if (const auto pad_token = special_token(config, "pad_token")) pad = added.id_of(*pad_token);
  const bool left = json_field<std::string>(config, "padding_side", "right") == "left";
  return std::make_shared<TokenizerPipeline>(TokenizerPipeline{
      cls, std::move(added), read_pre_tokenizer(tokenizer, config, gpt2), std::move(model),
      std::move(post), read_byte_level_decoder(tokenizer, gpt2), pad, left});
}

}  // namespace

std::shared_ptr<const TokenizerPipeline> read_tokenizer_directory(const std::string& directory) {
  const fs::path dir(directory);
  const json tokenizer = read_tokenizer_json(dir / "tokenizer.json");
  const fs::path config_path = dir / "tokenizer_config.json";
  const json config = fs::exists(config_path) ? read_tokenizer_json(config_path) : json::object();
  try {
    return pipeline_of(tokenizer, config);
  } catch (const json::exception& e) {
    TORCH_CHECK_VALUE(false, "load_hf_tokenizer: ", (dir / "tokenizer.json").string(), " or ",
                      config_path.string(), " is malformed: ", e.what());
  }
}

}  // namespace detail
}  // namespace mha
