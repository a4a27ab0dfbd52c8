#pragma once

// Private: the components tokenizer.json writes ("normalizer",
// "pre_tokenizer", "model", "decoder"), each read as tokenizers' serde
// writes it (tokenizers/src/{normalizers,pre_tokenizers,models,decoders}/).
// An unknown type is a `c10::Error` naming it and the supported ones.

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "text/pipeline_parts.h"

namespace mha {
namespace detail {

/// `value`'s field `key` as `T`, or `fallback` where absent or null.
template <typename T>
T json_field(const nlohmann::json& value, const char* key, T fallback) {
  const auto found = value.find(key);
  return found == value.end() || found->is_null() ? fallback : found->get<T>();
}

/// `path` parsed; `c10::Error` naming it when missing or not JSON.
nlohmann::json read_json_file(const std::filesystem::path& path);

/// A BPE model's merges, in either of tokenizer.json's forms.
std::vector<std::pair<std::string, std::string>> read_merges(const nlohmann::json& model);

/// A normalizer (null for JSON null).
std::unique_ptr<const Normalizer> read_normalizer(const nlohmann::json& normalizer);
/// A pre-tokenizer (null for JSON null).
std::unique_ptr<const PreTokenizer> read_pre_tokenizer(const nlohmann::json& pre_tokenizer);
/// A model: BPE, WordPiece or Unigram.
std::unique_ptr<const TokenModel> read_model(const nlohmann::json& model);
/// A decoder (JSON null: the tokens joined with spaces, as tokenizers does).
std::unique_ptr<const Decoder> read_decoder(const nlohmann::json& decoder);

}  // namespace detail
}  // namespace mha
