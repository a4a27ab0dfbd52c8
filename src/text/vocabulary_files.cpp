#include "text/vocabulary_files.h"

#include <c10/util/Exception.h>

#include <fstream>

#include "text/sentencepiece_model.h"
#include "text/tokenizer_json.h"

namespace mha {
namespace detail {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

/// `path`'s lines, without their "\n" (a "\r" stays, as Python's `rstrip("\n")` keeps it).
std::vector<std::string> read_lines(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  TORCH_CHECK_VALUE(in.good(), "load_hf_tokenizer: ", path.string(), " cannot be read");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// BERT's vocab.txt: a token a line, its id the line's index (a token seen
/// again takes the later index, as `load_vocab`'s dict does).
json word_piece_vocabulary(const fs::path& path) {
  json vocab = json::object();
  const std::vector<std::string> lines = read_lines(path);
  for (size_t id = 0; id < lines.size(); ++id) vocab[lines[id]] = id;
  return vocab;
}

/// merges.txt: "left right" a line after an optional "#version" line.
json merges_of(const fs::path& path) {
  json merges = json::array();
  for (const std::string& line : read_lines(path)) {
    if (line.rfind("#version", 0) == 0) continue;
    const size_t space = line.find(' ');
    TORCH_CHECK_VALUE(space != std::string::npos && line.find(' ', space + 1) == std::string::npos,
                      "load_hf_tokenizer: ", path.string(), ": merge ", merges.size() + 1,
                      " is not two tokens separated by one space: '", line, "'");
    merges.push_back(json::array({line.substr(0, space), line.substr(space + 1)}));
  }
  return merges;
}

/// tokenizer_config.json's "added_tokens_decoder" as tokenizer.json's "added_tokens".
json added_tokens_of(const json& config) {
  json added = json::array();
  // A local: the loop may not iterate `items()` of a temporary.
  const json decoder = config.value("added_tokens_decoder", json::object());
  for (const auto& [id, token] : decoder.items()) {
    json entry = token;
    entry["id"] = std::stoll(id);
    added.push_back(entry);
  }
  return added;
}

}  // namespace

std::optional<json> tokenizer_json_of_vocabulary_files(const fs::path& dir,
                                                       const std::string& cls,
                                                       const json& config) {
  json tokenizer;
  if ((cls == "BertTokenizer" || cls == "DistilBertTokenizer") && fs::exists(dir / "vocab.txt")) {
    tokenizer["model"] = {{"type", "WordPiece"},
                          {"vocab", word_piece_vocabulary(dir / "vocab.txt")}};
  } else if ((cls == "GPT2Tokenizer" || cls == "RobertaTokenizer") &&
             fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt")) {
    tokenizer["model"] = {{"type", "BPE"},
                          {"vocab", read_json_file(dir / "vocab.json")},
                          {"merges", merges_of(dir / "merges.txt")}};
  } else if (cls == "LlamaTokenizer" && fs::exists(dir / "tokenizer.model")) {
    tokenizer = bpe_tokenizer_json_of_sentencepiece(dir / "tokenizer.model");
  } else {
    return std::nullopt;
  }
  // The config's added tokens after the model's own (a sentencepiece model's control pieces).
  json& added = tokenizer["added_tokens"];
  if (added.is_null()) added = json::array();
  for (const json& token : added_tokens_of(config)) {
    bool known = false;
    for (const json& t : added) known = known || t.at("id") == token.at("id");
    if (!known) added.push_back(token);
  }
  return tokenizer;
}

}  // namespace detail
}  // namespace mha
