#pragma once

// Private: the text each token adds to a decoded sequence when it follows
// other text, as transformers' `StopStringCriteria.clean_tokenizer_vocab`
// computes it (transformers/generation/stopping_criteria.py): a byte-level
// token's bytes, a byte-fallback token's byte, else the decoder's text of the
// token after the tokens of "abcdef", less their text.

#include <optional>
#include <string>
#include <vector>

#include "text/tokenizer_pipeline.h"

namespace mha {
namespace detail {

/// Each id's text, and what lengths count.
struct TokenTexts {
  /// By id: the text (bytes, which may end inside a character for byte
  /// tokens), or none for an id without a token.
  std::vector<std::optional<std::string>> by_id;
  /// Lengths count bytes (a ByteLevel or ByteFallback decoder), else characters.
  bool counts_bytes = false;
};

/// `pipeline`'s token texts; `c10::Error` where a token's text cannot be
/// told apart from the prefix (transformers' `index` fails there too).
TokenTexts token_texts(const TokenizerPipeline& pipeline);

}  // namespace detail
}  // namespace mha
