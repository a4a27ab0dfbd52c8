#pragma once

// Private: tokenizers' `Precompiled` normalizer: SentencePiece's compiled
// normalization rules (a `precompiled_charsmap`: a Darts double-array trie of
// the rewritten byte strings and the strings they become), applied to each
// extended grapheme cluster as tokenizers applies them
// (tokenizers/src/normalizers/precompiled.rs; the spm_precompiled crate).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/pipeline_parts.h"

namespace mha {
namespace detail {

/// SentencePiece's normalization rules.
class PrecompiledNormalizer final : public Normalizer {
 public:
  /// `charsmap`: the rules' bytes (a little-endian u32 trie size in bytes,
  /// the trie's u32 units, then the NUL-terminated replacements);
  /// `c10::Error` when they do not parse.
  explicit PrecompiledNormalizer(const std::string& charsmap);
  /// Each grapheme cluster under 6 bytes that starts with a rule's key
  /// replaced whole by the shortest key's replacement; else each of its
  /// characters that starts with a key replaced by it.
  std::string normalize(const std::string& text) const override;
  void normalize_aligned(std::string& text, Alignment& origin) const override;

 private:
  /// The replacement of the shortest key that prefixes `chunk`, if any.
  std::optional<std::string_view> transform(std::string_view chunk) const;

  std::vector<uint32_t> trie_;
  std::string replacements_;
};

/// The bytes of base64 `text` (RFC 4648 with padding, as tokenizer.json
/// writes the charsmap); `c10::Error` naming `what` otherwise.
std::string base64_decode(const std::string& text, const char* what);

}  // namespace detail
}  // namespace mha
