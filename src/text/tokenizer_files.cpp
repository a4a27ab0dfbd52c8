#include "text/tokenizer_files.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "text/bert_text.h"
#include "text/bpe.h"
#include "text/byte_level.h"
#include "text/decoders.h"
#include "text/normalizers.h"
#include "text/pre_tokenizers.h"
#include "text/tokenizer_json.h"
#include "text/vocabulary_files.h"
#include "text/word_piece.h"

namespace mha {
namespace detail {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

/// A special token of tokenizer_config.json: a string, an AddedToken's
/// fields, or null.
std::optional<std::string> special_token(const json& config, const char* key) {
  const auto found = config.find(key);
  if (found == config.end() || found->is_null()) return std::nullopt;
  if (found->is_string()) return found->get<std::string>();
  return found->at("content").get<std::string>();
}

/// tokenizer.json's "added_tokens", and the config's special tokens that
/// are not among them (transformers adds those, special, at their vocabulary
/// id or after the vocabulary).
std::vector<AddedToken> read_added(const json& tokenizer,
                                   const json& config,
                                   const TokenModel& model) {
  std::vector<AddedToken> added;
  for (const json& t : tokenizer.value("added_tokens", json::array())) {
    const bool special = json_field<bool>(t, "special", false);
    added.push_back({t.at("content").get<std::string>(), t.at("id").get<int64_t>(), special,
                     json_field<bool>(t, "normalized", !special),
                     json_field<bool>(t, "lstrip", false), json_field<bool>(t, "rstrip", false),
                     json_field<bool>(t, "single_word", false)});
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
    added.push_back({*content, id, /*special=*/true, /*normalized=*/false, false, false});
  }
  return added;
}

/// The template of `cls`, `$A`, `sep`, and for a pair then `$B`, `sep`:
/// BERT's `[CLS] $A [SEP] $B:1 [SEP]:1` (BertProcessing); `roberta`: a pair
/// has two `sep` between its sequences, RoBERTa's `<s> $A </s></s> $B </s>`
/// (RobertaProcessing).
TemplateProcessing cls_sep_template(int64_t cls, int64_t sep, bool roberta) {
  using Kind = TemplatePiece::Kind;
  TemplateProcessing t;
  t.single = {{Kind::kSpecial, {cls}}, {Kind::kSequenceA, {}}, {Kind::kSpecial, {sep}}};
  t.pair = t.single;
  // BERT's pair is of type 1 from $B on; RoBERTa's every token is of type 0.
  const int64_t pair_type = roberta ? 0 : 1;
  if (roberta) t.pair.push_back({Kind::kSpecial, {sep}});
  t.pair.push_back({Kind::kSequenceB, {}, pair_type});
  t.pair.push_back({Kind::kSpecial, {sep}, pair_type});
  return t;
}

/// The class transformers 5.23 makes for tokenizer_config.json's
/// `tokenizer_class` (models/auto/tokenization_auto.py's names): a "...Fast"
/// name is its class's alias, ElectraTokenizer is BertTokenizer and
/// BartTokenizer is RobertaTokenizer; none: the generic TokenizersBackend.
std::string instantiated_class(const json& config) {
  std::string cls = json_field<std::string>(config, "tokenizer_class", "TokenizersBackend");
  const std::string fast = "Fast";
  if (cls != "PreTrainedTokenizerFast" && cls.size() > fast.size() &&
      cls.compare(cls.size() - fast.size(), fast.size(), fast) == 0) {
    cls.resize(cls.size() - fast.size());
  }
  if (cls == "ElectraTokenizer") return "BertTokenizer";
  if (cls == "BartTokenizer") return "RobertaTokenizer";
  return cls;
}

/// BERT's class or DistilBERT's (its subclass, the same pipeline).
bool bert_class(const std::string& cls) {
  return cls == "BertTokenizer" || cls == "DistilBertTokenizer";
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
          const json& special = piece["SpecialToken"];
          result.push_back({TemplatePiece::Kind::kSpecial,
                            specials.at(special.at("id").get<std::string>()),
                            json_field<int64_t>(special, "type_id", 0)});
        } else {
          const json& sequence = piece.at("Sequence");
          result.push_back({sequence.at("id").get<std::string>() == "A"
                                ? TemplatePiece::Kind::kSequenceA
                                : TemplatePiece::Kind::kSequenceB,
                            {},
                            json_field<int64_t>(sequence, "type_id", 0)});
        }
      }
      return result;
    };
    out.single = pieces(processor.at("single"));
    out.pair = pieces(processor.at("pair"));
    out.later_windows_keep_encoded_types = true;
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    out = cls_sep_template(processor.at("cls").at(1).get<int64_t>(),
                           processor.at("sep").at(1).get<int64_t>(), type == "RobertaProcessing");
  } else {
    TORCH_CHECK_VALUE(type == "ByteLevel", "load_hf_tokenizer: tokenizer.json's post_processor '",
                      type,
                      "' is not supported yet; supported: TemplateProcessing, "
                      "BertProcessing, RobertaProcessing, ByteLevel, Sequence");
  }
  if (type == "RobertaProcessing" || type == "ByteLevel") {  // tokenizers' defaults: true, true
    out.trim_offsets = json_field<bool>(processor, "trim_offsets", true);
    out.trim_keeps_prefix_space = json_field<bool>(processor, "add_prefix_space", true);
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
  t.later_windows_keep_encoded_types = true;  // a TemplateProcessing
  t.single.clear();
  t.pair.clear();
  for (const Kind sequence : {Kind::kSequenceA, Kind::kSequenceB}) {
    const int64_t type = sequence == Kind::kSequenceA ? 0 : 1;  // `$A:0`, `$B:1`
    std::vector<TemplatePiece> around;
    if (add_bos) around.push_back({Kind::kSpecial, {*added.id_of(*bos)}, type});
    around.push_back({sequence, {}, type});
    if (add_eos) around.push_back({Kind::kSpecial, {*added.id_of(*eos)}, type});
    if (sequence == Kind::kSequenceA) t.single = around;
    t.pair.insert(t.pair.end(), around.begin(), around.end());
  }
  return t;
}

/// LlamaTokenizer's own pipeline (models/llama/tokenization_llama.py): a
/// byte-fallback BPE without unk token behind SentencePiece's Metaspace
/// (prefix space on the sequence's start only, unless `legacy`).
void build_llama(std::unordered_map<std::string, int64_t> vocab,
                 const std::vector<std::pair<std::string, std::string>>& merges,
                 const json& config,
                 TokenizerPipeline& p) {
  const std::string metaspace = "\xE2\x96\x81";  // U+2581
  const bool prefix_space = json_field<bool>(config, "add_prefix_space", true);
  const PrependScheme scheme =
      !prefix_space ? PrependScheme::kNever
                    : (json_field<bool>(config, "legacy", false) ? PrependScheme::kAlways
                                                                 : PrependScheme::kFirst);
  BpeOptions options;
  options.fuse_unk = true;
  options.byte_fallback = true;
  p.model = std::make_unique<Bpe>(std::move(vocab), merges, std::move(options));
  p.pre_tokenizer = std::make_unique<MetaspacePreTokenizer>(metaspace, scheme, /*split=*/false);
  std::vector<std::unique_ptr<const Decoder>> steps;
  steps.push_back(std::make_unique<ReplaceDecoder>(Pattern(metaspace, false), " "));
  steps.push_back(std::make_unique<ByteFallbackDecoder>());
  steps.push_back(std::make_unique<FuseDecoder>());
  if (prefix_space) steps.push_back(std::make_unique<StripDecoder>(U' ', 1, 0));
  p.decoder = std::make_unique<DecoderSequence>(std::move(steps));
}

/// Qwen2Tokenizer's own pipeline (models/qwen2/tokenization_qwen2.py): NFC,
/// its split pattern, then a byte-level BPE.
void build_qwen2(std::unordered_map<std::string, int64_t> vocab,
                 const std::vector<std::pair<std::string, std::string>>& merges,
                 const json& config,
                 TokenizerPipeline& p) {
  constexpr const char* kQwen2Pattern =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  p.normalizer = std::make_unique<UnicodeFormNormalizer>(UnicodeForm::kNFC);
  std::vector<std::unique_ptr<const PreTokenizer>> steps;
  steps.push_back(std::make_unique<SplitPreTokenizer>(Pattern(kQwen2Pattern, true),
                                                      SplitBehavior::kIsolated, false));
  steps.push_back(std::make_unique<ByteLevelPreTokenizer>(
      json_field<bool>(config, "add_prefix_space", false), /*use_regex=*/false));
  p.pre_tokenizer = std::make_unique<PreTokenizerSequence>(std::move(steps));
  p.model = std::make_unique<Bpe>(std::move(vocab), merges, BpeOptions{});
  p.decoder = std::make_unique<ByteLevelDecoder>();
}

/// The components a family's own class builds in its `__init__` (around the
/// file's vocabulary), or the file's for the generic classes: fills `p`.
void build_components(const std::string& cls,
                      const json& tokenizer,
                      const json& config,
                      TokenizerPipeline& p) {
  const json& model = tokenizer.at("model");
  const auto vocab = [&] {
    return model.at("vocab").get<std::unordered_map<std::string, int64_t>>();
  };
  if (cls == "GPT2Tokenizer" ||
      cls == "RobertaTokenizer") {  // models/{gpt2,roberta}/tokenization_*.py
    p.pre_tokenizer = std::make_unique<ByteLevelPreTokenizer>(
        json_field<bool>(config, "add_prefix_space", false), true);
    p.model = std::make_unique<Bpe>(vocab(), read_merges(model), BpeOptions{});
    p.decoder = std::make_unique<ByteLevelDecoder>();
  } else if (bert_class(cls)) {  // models/bert/tokenization_bert.py
    const bool lowercase = json_field<bool>(config, "do_lower_case", true);
    p.normalizer = std::make_unique<BertNormalizer>(
        true, json_field<bool>(config, "tokenize_chinese_chars", true),
        json_field<bool>(config, "strip_accents", lowercase), lowercase);
    p.pre_tokenizer = std::make_unique<BertPreTokenizer>();
    p.model = std::make_unique<WordPiece>(
        vocab(), special_token(config, "unk_token").value_or("[UNK]"), "##", 100);
    p.decoder = std::make_unique<WordPieceDecoder>("##", true);
  } else if (cls == "LlamaTokenizer") {
    build_llama(vocab(), read_merges(model), config, p);
  } else if (cls == "Qwen2Tokenizer") {
    build_qwen2(vocab(), read_merges(model), config, p);
  } else {
    TORCH_CHECK_VALUE(cls == "TokenizersBackend" || cls == "PreTrainedTokenizerFast",
                      "load_hf_tokenizer: tokenizer_class '", cls,
                      "' is not supported yet; "
                      "supported: GPT2Tokenizer, RobertaTokenizer (BartTokenizer), BertTokenizer "
                      "(ElectraTokenizer), DistilBertTokenizer, LlamaTokenizer, Qwen2Tokenizer, "
                      "TokenizersBackend, PreTrainedTokenizerFast");
    p.normalizer = read_normalizer(tokenizer.value("normalizer", json()));
    p.pre_tokenizer = read_pre_tokenizer(tokenizer.value("pre_tokenizer", json()));
    p.model = read_model(model);
    p.decoder = read_decoder(tokenizer.value("decoder", json()));
  }
}

/// The post-processor: BertTokenizer's and RobertaTokenizer's own template;
/// else the file's, unless the config sets add_bos_token or add_eos_token,
/// or the file has none (transformers' update_post_processor).
TemplateProcessing read_template(const std::string& cls,
                                 const json& tokenizer,
                                 const json& config,
                                 const AddedTokens& added) {
  if (bert_class(cls) || cls == "RobertaTokenizer") {
    const bool roberta = cls == "RobertaTokenizer";
    const auto cls_token = special_token(config, "cls_token").value_or(roberta ? "<s>" : "[CLS]");
    const auto sep_token = special_token(config, "sep_token").value_or(roberta ? "</s>" : "[SEP]");
    TemplateProcessing t =
        cls_sep_template(added.id_of(cls_token).value_or(roberta ? 0 : 2),
                         added.id_of(sep_token).value_or(roberta ? 2 : 3), roberta);
    t.trim_offsets = roberta && json_field<bool>(config, "trim_offsets", true);
    t.trim_keeps_prefix_space = json_field<bool>(config, "add_prefix_space", false);
    return t;
  }
  const json processor = tokenizer.value("post_processor", json());
  if (config.contains("add_bos_token") || config.contains("add_eos_token") || processor.is_null()) {
    return bos_eos_template(config, added);
  }
  TemplateProcessing post;
  read_post_processor(processor, post);
  return post;
}

/// The pipeline of the parsed files.
std::shared_ptr<const TokenizerPipeline> pipeline_of(const json& tokenizer, const json& config) {
  const std::string cls = instantiated_class(config);
  auto p = std::make_shared<TokenizerPipeline>();
  p->tokenizer_class = cls;
  build_components(cls, tokenizer, config, *p);
  p->added = AddedTokens(read_added(tokenizer, config, *p->model));
  p->post_processor = read_template(cls, tokenizer, config, p->added);
  // transformers skips its clean-up for BPE models (it would strip real spaces).
  p->clean_up_tokenization_spaces =
      json_field<bool>(config, "clean_up_tokenization_spaces", false) &&
      dynamic_cast<const Bpe*>(p->model.get()) == nullptr;
  if (const auto pad_token = special_token(config, "pad_token"))
    p->pad_id = p->added.id_of(*pad_token);
  if (const auto unk_token = special_token(config, "unk_token"))
    p->unk_id = p->added.id_of(*unk_token);
  if (const auto cls_token = special_token(config, "cls_token"))
    p->cls_id = p->added.id_of(*cls_token);
  // transformers' VERY_LARGE_INTEGER (1e30) when absent: no limit.
  const double max_length = json_field<double>(config, "model_max_length", 1e30);
  if (max_length > 0 && max_length < 1e18) p->model_max_length = static_cast<int64_t>(max_length);
  // A class's own default side (its `padding_side` attribute) where the config names none.
  const bool llama = cls == "LlamaTokenizer";
  p->pad_left = json_field<std::string>(config, "padding_side", llama ? "left" : "right") == "left";
  p->truncate_left = json_field<std::string>(config, "truncation_side", "right") == "left";
  return p;
}

}  // namespace

std::shared_ptr<const TokenizerPipeline> read_tokenizer_directory(const std::string& directory) {
  const fs::path dir(directory);
  const fs::path config_path = dir / "tokenizer_config.json";
  const json config = fs::exists(config_path) ? read_json_file(config_path) : json::object();
  std::optional<json> files;
  if (!fs::exists(dir / "tokenizer.json")) {
    files = tokenizer_json_of_vocabulary_files(dir, instantiated_class(config), config);
  }
  const json tokenizer = files ? *files : read_json_file(dir / "tokenizer.json");
  std::shared_ptr<const TokenizerPipeline> pipeline;
  try {
    pipeline = pipeline_of(tokenizer, config);
  } catch (const json::exception& e) {
    TORCH_CHECK_VALUE(false, "load_hf_tokenizer: ", (dir / "tokenizer.json").string(), " or ",
                      config_path.string(), " is malformed: ", e.what());
  }
  return pipeline;
}

}  // namespace detail
}  // namespace mha
