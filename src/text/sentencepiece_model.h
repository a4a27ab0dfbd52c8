#pragma once

// Private: a SentencePiece `.model` file (Llama's tokenizer.model) as
// transformers 5.23 reads it for a class whose model is BPE
// (convert_slow_tokenizer.py's `SentencePieceExtractor.extract`,
// tokenization_utils_base.py's `generate_merges`): the pieces in id order as
// the vocabulary, the merges generated from it, the control and user-defined
// pieces as added tokens. The file is read with the sentencepiece library
// (the pieces' types from its serialized model).

#include <filesystem>
#include <nlohmann/json.hpp>

namespace mha {
namespace detail {

/// The tokenizer.json that the SentencePiece model at `path` stands for, for
/// a class whose model is BPE: "model" (BPE, "vocab", "merges") and
/// "added_tokens". `c10::Error` naming the file where it is not a model.
nlohmann::json bpe_tokenizer_json_of_sentencepiece(const std::filesystem::path& path);

}  // namespace detail
}  // namespace mha
