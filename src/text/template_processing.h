#pragma once

// Private: tokenizers' TemplateProcessing post-processor: the special tokens
// around a sequence or a pair (`<s> $A </s>`, `[CLS] $A [SEP] $B [SEP]`),
// as tokenizer.json's "post_processor" (or transformers' add_bos_token /
// add_eos_token) writes it (tokenizers/src/processors/template.rs).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace mha {
namespace detail {

/// One piece of a template: a special token's ids, or sequence A or B, and
/// the token type id of its ids.
struct TemplatePiece {
  enum class Kind { kSpecial, kSequenceA, kSequenceB } kind = Kind::kSequenceA;
  std::vector<int64_t> ids;  ///< a special token's
  int64_t type_id = 0;       ///< tokenizers' `type_id` (transformers' token_type_ids)
};

/// The templates of a single sequence and of a pair.
struct TemplateProcessing {
  std::vector<TemplatePiece> single{{TemplatePiece::Kind::kSequenceA, {}}};
  std::vector<TemplatePiece> pair{{TemplatePiece::Kind::kSequenceA, {}, 0},
                                  {TemplatePiece::Kind::kSequenceB, {}, 1}};
  /// RobertaProcessing's and ByteLevel's `trim_offsets`: each token's offsets
  /// without the spaces its token begins or ends with...
  bool trim_offsets = false;
  /// ... but a sequence's first token keeps one (their `add_prefix_space`).
  bool trim_keeps_prefix_space = false;
  /// tokenizers' TemplateProcessing types only a side's first window as the
  /// template says: its later (overflowing) windows keep the type they were
  /// encoded with, the text's 0 and the pair's 1 (BertProcessing and
  /// RobertaProcessing type every window as the first).
  bool later_windows_keep_encoded_types = false;

  /// The ids the template adds to a sequence (or a pair).
  int64_t added_tokens(bool pair) const;
  /// `a` (and `b`, for a pair) with the template's special tokens.
  std::vector<int64_t> apply(const std::vector<int64_t>& a,
                             const std::vector<int64_t>* b = nullptr) const;
  /// The token type ids of `apply(a, b)` for `a_length` ids of `a` and
  /// `b_length` of `b` (none: no pair); without `specials`, of `a` and `b`
  /// alone, which keep their pieces' types (tokenizers' process_encodings).
  std::vector<int64_t> type_ids(size_t a_length,
                                std::optional<size_t> b_length,
                                bool specials) const;
};

}  // namespace detail
}  // namespace mha
