#pragma once

// Private: a Hugging Face directory's tokenizer files read into a
// `TokenizerPipeline`, as transformers 5.23's AutoTokenizer.from_pretrained
// reads them (tokenization_utils_tokenizers.py): tokenizer.json's pipeline,
// rebuilt where the class of tokenizer_config.json builds its own.

#include <memory>
#include <string>

#include "text/tokenizer_pipeline.h"

namespace mha {
namespace detail {

/// The pipeline of `directory`'s tokenizer.json and tokenizer_config.json.
/// Throws `c10::Error` naming the file for a missing or malformed file, and
/// naming the component and the supported ones for a component not built yet.
std::shared_ptr<const TokenizerPipeline> read_tokenizer_directory(const std::string& directory);

}  // namespace detail
}  // namespace mha
