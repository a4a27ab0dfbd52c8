#pragma once

// Private: tokenizers' TemplateProcessing post-processor: the special tokens
// around a sequence or a pair (`<s> $A </s>`, `[CLS] $A [SEP] $B [SEP]`),
// as tokenizer.json's "post_processor" (or transformers' add_bos_token /
// add_eos_token) writes it (tokenizers/src/processors/template.rs).

#include <cstdint>
#include <vector>

namespace mha {
namespace detail {

/// One piece of a template: a special token's ids, or sequence A or B.
struct TemplatePiece {
  enum class Kind { kSpecial, kSequenceA, kSequenceB } kind = Kind::kSequenceA;
  std::vector<int64_t> ids;  ///< a special token's
};

/// The templates of a single sequence and of a pair.
struct TemplateProcessing {
  std::vector<TemplatePiece> single{{TemplatePiece::Kind::kSequenceA, {}}};
  std::vector<TemplatePiece> pair{{TemplatePiece::Kind::kSequenceA, {}},
                                  {TemplatePiece::Kind::kSequenceB, {}}};
  /// RobertaProcessing's and ByteLevel's `trim_offsets`: each token's offsets
  /// without the spaces its token begins or ends with...
  bool trim_offsets = false;
  /// ... but a sequence's first token keeps one (their `add_prefix_space`).
  bool trim_keeps_prefix_space = false;

  /// The ids the template adds to a sequence (or a pair).
  int64_t added_tokens(bool pair) const;
  /// `a` (and `b`, for a pair) with the template's special tokens.
  std::vector<int64_t> apply(const std::vector<int64_t>& a,
                             const std::vector<int64_t>* b = nullptr) const;
};

}  // namespace detail
}  // namespace mha
