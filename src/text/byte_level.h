#pragma once

// Private: tokenizers' ByteLevel components (GPT-2's byte-level BPE): the
// pre-tokenizer that splits text with GPT-2's pattern and writes each byte as
// a printable character, and the decoder that turns those characters back
// into bytes (tokenizers/src/pre_tokenizers/byte_level.rs).

#include <optional>
#include <string>
#include <vector>

#include "text/pipeline_parts.h"

namespace mha {
namespace detail {

/// tokenizers' `ByteLevel` pre-tokenizer.
class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  /// `add_prefix_space`: a space before a text that does not start with one;
  /// `use_regex`: split with GPT-2's pattern (else the text is one piece).
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}

  /// `piece` (after the prefix space) as the pattern splits it, each piece
  /// written as its bytes' characters (UTF-8).
  void split(const TextPiece& piece, std::vector<TextPiece>& out) const override;

 private:
  bool add_prefix_space_;
  bool use_regex_;
};

/// The bytes `token`'s characters stand for, or none where one of them is
/// not a byte's character.
std::optional<std::string> byte_level_bytes(const std::string& token);

/// tokenizers' `ByteLevel` decoder: each token's characters back to their
/// bytes (a token with a character outside the map keeps its own UTF-8
/// bytes), all tokens' bytes joined, then read as UTF-8 with U+FFFD for
/// invalid bytes.
class ByteLevelDecoder final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override;
};

}  // namespace detail
}  // namespace mha
