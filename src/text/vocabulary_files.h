#pragma once

// Private: directories without tokenizer.json that transformers 5.23 still
// reads with a family's own class: BERT's vocab.txt (BertTokenizer), GPT-2's
// and RoBERTa's vocab.json and merges.txt (GPT2Tokenizer, RobertaTokenizer,
// BartTokenizer), Llama's SentencePiece tokenizer.model (LlamaTokenizer),
// their added tokens in tokenizer_config.json's "added_tokens_decoder"
// (models/bert/tokenization_bert.py `load_vocab`; tokenizers'
// `BPE::read_file`; sentencepiece_model.h).

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace mha {
namespace detail {

/// The tokenizer.json `dir`'s vocabulary files stand for ("model" with
/// "vocab" and "merges", "added_tokens"), for the class `cls`; none where
/// `cls` reads no such files or they are absent.
std::optional<nlohmann::json> tokenizer_json_of_vocabulary_files(const std::filesystem::path& dir,
                                                                 const std::string& cls,
                                                                 const nlohmann::json& config);

}  // namespace detail
}  // namespace mha
