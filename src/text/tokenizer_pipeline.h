#pragma once

// Private: a tokenizer's whole pipeline as transformers 5.23 runs it: the
// added tokens found first (those that are not normalized in the raw text,
// the others in the normalized text), the normalizer, the pre-tokenizer and
// the model on the text between them, then the post-processor's special
// tokens; decoding back through the decoder. Read from a directory by
// tokenizer_files.cpp.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "text/added_tokens.h"
#include "text/pipeline_parts.h"
#include "text/template_processing.h"

namespace mha {
namespace detail {

/// What `Tokenizer` runs; immutable once read, so encodes may run at once.
struct TokenizerPipeline {
  std::string tokenizer_class;  ///< tokenizer_config.json's class
  /// tokenizer.json's added_tokens and the config's special tokens.
  AddedTokens added{std::vector<AddedToken>{}};
  std::unique_ptr<const Normalizer> normalizer;       ///< or null
  std::unique_ptr<const PreTokenizer> pre_tokenizer;  ///< or null: the text is one word
  std::unique_ptr<const TokenModel> model;
  TemplateProcessing post_processor;
  std::unique_ptr<const Decoder> decoder;
  bool clean_up_tokenization_spaces = false;  ///< transformers' decode clean-up (not for BPE)
  std::optional<int64_t> pad_id;
  std::optional<int64_t> unk_id;            ///< the unk_token's id
  std::optional<int64_t> cls_id;            ///< the cls_token's id
  std::optional<int64_t> model_max_length;  ///< tokenizer_config.json's, when it names one
  bool pad_left = false;                    ///< padding_side "left"
  bool truncate_left = false;               ///< truncation_side "left"

  /// `text`'s ids without special tokens around it (added tokens written in
  /// the text are found); `offsets`, unless null, receives each id's bytes
  /// [first, second) in `text` (tokenizers' byte offsets), and `words`, unless
  /// null (with `offsets` only), each id's word: the index of the piece it
  /// came from, an added token or a pre-tokenizer's word (tokenizers' word ids).
  std::vector<int64_t> encode_plain(const std::string& text,
                                    Spans* offsets = nullptr,
                                    std::vector<int64_t>* words = nullptr) const;
  /// The ids' text; `skip_special_tokens` leaves out special added tokens.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const;
  /// `decode` before transformers' clean-up of spaces (the decoder's text).
  std::string decode_uncleaned(const std::vector<int64_t>& ids, bool skip_special_tokens) const;
  /// The token of `id` (an added token's content or the vocabulary's), or null.
  const std::string* token_of(int64_t id) const {
    if (const AddedToken* added_token = added.find(id)) return &added_token->content;
    return model->id_to_token(id);
  }
  /// The byte of `id`'s `<0xXX>` token where the decoder joins such tokens
  /// into bytes (ByteFallback), else -1.
  int fallback_byte_of(int64_t id) const;
  /// Tokens ids can have: the model's vocabulary and the added tokens.
  int64_t size() const { return std::max(model->size(), added.end_id()); }

 private:
  /// Appends the ids of `piece` (no added token in it, normalized) to `ids`,
  /// and, unless null, their bytes in the original text (`piece.origin`) to
  /// `offsets` and their words, counted on from `word`, to `words`.
  void encode_words(const TextPiece& piece,
                    std::vector<int64_t>& ids,
                    Spans* offsets,
                    std::vector<int64_t>* words,
                    int64_t& word) const;
};

}  // namespace detail
}  // namespace mha
