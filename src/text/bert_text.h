#pragma once

// Private: BERT's normalizer and pre-tokenizer as tokenizers writes them
// (tokenizers/src/normalizers/bert.rs, pre_tokenizers/bert.rs): control
// characters removed, whitespace made a space, CJK ideographs spaced,
// accents stripped, lowercase; then words split at whitespace and at each
// punctuation character.

#include <string>
#include <vector>

#include "text/pipeline_parts.h"

namespace mha {
namespace detail {

/// tokenizers' `BertNormalizer`.
class BertNormalizer final : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool handle_chinese_chars, bool strip_accents, bool lowercase)
      : clean_text_(clean_text),
        handle_chinese_chars_(handle_chinese_chars),
        strip_accents_(strip_accents),
        lowercase_(lowercase) {}
  std::string normalize(const std::string& text) const override;
  void normalize_aligned(std::string& text, Alignment& origin) const override;

 private:
  bool clean_text_, handle_chinese_chars_, strip_accents_, lowercase_;
};

/// tokenizers' `BertPreTokenizer`.
class BertPreTokenizer final : public PreTokenizer {
 public:
  void split(const TextPiece& piece, std::vector<TextPiece>& out) const override;
};

}  // namespace detail
}  // namespace mha
