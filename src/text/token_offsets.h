#pragma once

// Private: where each token of an encoded text came from, in characters of
// that text as Python indexes a str (tokenizers' `OffsetType::Char`), with
// the post-processor's `trim_offsets`.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "text/tokenizer_pipeline.h"

namespace mha {
namespace detail {

/// The characters [first, second) of `text` each token stands for, from its
/// bytes `byte_offsets` (`TokenizerPipeline::encode_plain`): tokenizers'
/// byte-to-character conversion (a byte inside a character counts as that
/// character).
std::vector<std::pair<int64_t, int64_t>> character_offsets(const std::string& text,
                                                           const Spans& byte_offsets);

/// `offsets` of token `id`, the `index`-th of its sequence after truncation,
/// without the spaces the token begins or ends with where the post-processor
/// trims offsets (tokenizers' `process_offsets`).
void trim_offsets(const TokenizerPipeline& pipeline,
                  int64_t id,
                  size_t index,
                  std::pair<int64_t, int64_t>& offsets);

}  // namespace detail
}  // namespace mha
