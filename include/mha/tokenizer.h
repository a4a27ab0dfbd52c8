#pragma once

// Text in, token ids out, and back: a Hugging Face directory's tokenizer,
// read as transformers' `AutoTokenizer.from_pretrained` reads it, giving the
// ids transformers gives. Built so far: GPT-2's byte-level BPE and BERT's
// WordPiece (`GPT2Tokenizer`, `RobertaTokenizer`, `BertTokenizer`, and tokenizer.json pipelines
// of their components); other components are refused by name. See
// docs/tokenizer.md.

#include <torch/arg.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mha {

namespace detail {
struct TokenizerPipeline;
}  // namespace detail

/// transformers' truncation strategies (its `truncation` argument).
enum class Truncation {
  kNone,          ///< no truncation (`False`)
  kLongestFirst,  ///< `"longest_first"` (`True`): a pair's longer sequence loses tokens first
  kOnlyFirst,     ///< `"only_first"`: only the text loses tokens
  kOnlySecond,    ///< `"only_second"`: only the pair loses tokens
};

/// How to encode, transformers' `tokenizer(...)` arguments of the same names.
struct EncodeOptions {
  /// The post-processor's special tokens around the ids.
  TORCH_ARG(bool, add_special_tokens) = true;
  /// How a text (or a pair) longer than `max_length` ids, special tokens
  /// included, loses ids: from the end, or from the start where
  /// tokenizer_config.json's `truncation_side` is "left".
  TORCH_ARG(Truncation, truncation) = Truncation::kNone;
  /// The length to truncate to (> 0 with `truncation`) and to pad to.
  TORCH_ARG(int64_t, max_length) = 0;
  /// `encode_batch`: every row padded to `max_length` (`padding="max_length"`;
  /// a longer row is not cut unless `truncation` says), else to the longest.
  TORCH_ARG(bool, pad_to_max_length) = false;
  /// `encode_overflowing`: the ids consecutive windows of a cut sequence share.
  TORCH_ARG(int64_t, stride) = 0;
  /// `encode_batch`: each token's characters too (`TokenizedBatch::offset_mapping`).
  TORCH_ARG(bool, return_offsets_mapping) = false;
};

/// A batch of texts' ids, padded (transformers'
/// `tokenizer(texts, padding=True, return_tensors="pt")`).
struct TokenizedBatch {
  /// (N, L) int64, padded with the pad token on the configured side.
  torch::Tensor input_ids;
  /// (N, L) int64: 1 for tokens, 0 for padding.
  torch::Tensor attention_mask;
  /// (N, L, 2) int64 with `EncodeOptions::return_offsets_mapping`: each
  /// token's characters in its text (`EncodedText::offset_mapping`), (0, 0)
  /// for special tokens and padding; else undefined.
  torch::Tensor offset_mapping;
};

/// A text's (or a pair's) ids and where each came from: transformers'
/// `tokenizer(text, pair, return_offsets_mapping=True)`.
struct EncodedText {
  std::vector<int64_t> input_ids;
  /// Per id, the characters [first, second) of its own text (the text's or
  /// the pair's) it stands for, counted in code points as Python indexes a
  /// str; (0, 0) for the post-processor's special tokens.
  std::vector<std::pair<int64_t, int64_t>> offset_mapping;
  /// Per id, 1 for a special token the post-processor added, else 0
  /// (transformers' `return_special_tokens_mask=True`; a special token
  /// written in the text is 0, as tokenizers marks it).
  std::vector<int64_t> special_tokens_mask;
  /// Per id, 0 for the text's, 1 for the pair's, -1 for a special token
  /// (transformers' `sequence_ids()`, None as -1).
  std::vector<int64_t> sequence_ids;
  /// Per id, its word in its own text (transformers' `word_ids()`, None as
  /// -1 for special tokens): the index of the piece it came from, an added
  /// token or a word of the pre-tokenizer (BERT's: whitespace and punctuation
  /// apart; byte-level: its regex's pieces; none: the whole text).
  std::vector<int64_t> word_ids;
  /// Per id, its token type (transformers' `token_type_ids`): the type the
  /// post-processor's template gives its piece (BERT's pair and its last
  /// `[SEP]`: 1); without special tokens, 0 for the text and 1 for the pair.
  std::vector<int64_t> token_type_ids;
};

/// A tokenizer (`load_hf_tokenizer`). Const and thread-safe: any number of
/// threads may encode and decode at once. Copies share the read files.
///
/// Errors (`c10::Error`): text that is not UTF-8 (the message names the byte
/// offset; Python refuses such bytes before transformers sees them), a
/// token id outside the vocabulary in `decode` (transformers skips it
/// silently; mha raises), padding without a pad token and a pair whose
/// truncated sequence is too short to lose enough ids (transformers' messages).
///
/// Example:
/// ```
/// mha::Tokenizer tokenizer = mha::load_hf_tokenizer("path/to/gpt2");
/// std::vector<int64_t> ids = tokenizer.encode("Hello world");
/// std::string text = tokenizer.decode(ids);  // "Hello world"
/// ```
class Tokenizer {
 public:
  /// `text`'s ids, transformers' `tokenizer(text, **options)["input_ids"]`.
  std::vector<int64_t> encode(const std::string& text, const EncodeOptions& options = {}) const;
  /// A pair's ids, transformers' `tokenizer(text, pair, **options)["input_ids"]`.
  std::vector<int64_t> encode_pair(const std::string& text,
                                   const std::string& pair,
                                   const EncodeOptions& options = {}) const;
  /// `encode` with each id's characters in `text` (or, for a pair, in its own
  /// text): transformers' `return_offsets_mapping=True`, for token
  /// classification and question answering.
  EncodedText encode_with_offsets(const std::string& text,
                                  const std::optional<std::string>& pair = std::nullopt,
                                  const EncodeOptions& options = {}) const;
  /// Every window of a text (and `pair`) cut by `options`' truncation, each
  /// with its special tokens: transformers' `tokenizer(text, pair,
  /// truncation=..., max_length=..., stride=..., return_overflowing_tokens=True)["input_ids"]`,
  /// in its order (the first row is `encode`'s; a pair whose sides both
  /// overflow gives every combination, as tokenizers' `Encoding::merge_with`).
  std::vector<std::vector<int64_t>> encode_overflowing(const std::string& text,
                                                       const std::optional<std::string>& pair,
                                                       const EncodeOptions& options) const;
  /// `encode_overflowing` with each window's offsets, special tokens mask and
  /// sequence ids (`encode_with_offsets` per window): transformers'
  /// `return_overflowing_tokens=True, return_offsets_mapping=True`, for
  /// question answering over long contexts.
  std::vector<EncodedText> encode_overflowing_with_offsets(const std::string& text,
                                                           const std::optional<std::string>& pair,
                                                           const EncodeOptions& options) const;
  /// Each text's ids, unpadded: transformers' `tokenizer(texts, **options)["input_ids"]`;
  /// the texts are encoded on at::get_num_threads() threads.
  std::vector<std::vector<int64_t>> encode_each(const std::vector<std::string>& texts,
                                                const EncodeOptions& options = {}) const;
  /// `texts` encoded (as `encode_each`) and padded (to the longest, or to
  /// `max_length`); with `return_offsets_mapping`, each token's characters too.
  TokenizedBatch encode_batch(const std::vector<std::string>& texts,
                              const EncodeOptions& options = {}) const;

  /// `ids`' text, transformers' `decode(ids, skip_special_tokens)`.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = false) const;
  /// Each row of `sequences` (N, L) integer decoded, transformers' `batch_decode`.
  std::vector<std::string> batch_decode(const torch::Tensor& sequences,
                                        bool skip_special_tokens = false) const;
  /// Each sequence decoded, transformers' `batch_decode` of a list of lists;
  /// on at::get_num_threads() threads.
  std::vector<std::string> batch_decode(const std::vector<std::vector<int64_t>>& sequences,
                                        bool skip_special_tokens = false) const;

  /// The id of `token` (an added token or one of the vocabulary), if any.
  std::optional<int64_t> token_to_id(const std::string& token) const;
  /// The token of `id` (an added token's content or the vocabulary's),
  /// transformers' `convert_ids_to_tokens`; nullopt for an id it has not.
  std::optional<std::string> id_to_token(int64_t id) const;
  /// `tokens` joined into text by the tokenizer's decoder (with spaces
  /// where it has none): transformers' `convert_tokens_to_string`.
  std::string convert_tokens_to_string(const std::vector<std::string>& tokens) const;
  /// The prefix of a word's continuing pieces in the model ("##" for
  /// WordPiece), or "" (BPE without one, Unigram).
  const std::string& continuing_subword_prefix() const;
  /// The pad token's id, if the tokenizer has one.
  std::optional<int64_t> pad_token_id() const;
  /// The unknown token's id, if the tokenizer has one.
  std::optional<int64_t> unk_token_id() const;
  /// The classifier token's id (BERT's `[CLS]`, RoBERTa's `<s>`), if the tokenizer has one.
  std::optional<int64_t> cls_token_id() const;
  /// tokenizer_config.json's `model_max_length`, if it names one (transformers'
  /// `model_max_length`; without it, no limit).
  std::optional<int64_t> model_max_length() const;
  /// Tokens an id may name: transformers' `len(tokenizer)`.
  int64_t size() const;
  /// The class transformers makes for the directory, e.g. "GPT2Tokenizer":
  /// tokenizer_config.json's, its "...Fast" and older names resolved as
  /// transformers resolves them (BartTokenizer is "RobertaTokenizer").
  const std::string& tokenizer_class() const;

 private:
  /// `a` (and `b`, a pair) truncated and given special tokens as `options` say.
  std::vector<int64_t> truncated_with_specials(std::vector<int64_t> a,
                                               std::vector<int64_t>* b,
                                               const EncodeOptions& options) const;
  /// `a` and `b` (or null) with the special tokens `options` ask for.
  std::vector<int64_t> with_specials(const std::vector<int64_t>& a,
                                     const std::vector<int64_t>* b,
                                     const EncodeOptions& options) const;
  /// The length the sequences are cut to: `max_length` less the special
  /// tokens (`c10::Error` unless positive with truncation).
  int64_t sequence_budget(bool pair, const EncodeOptions& options) const;

  friend Tokenizer load_hf_tokenizer(const std::string& directory);
  friend class DecodeStream;
  friend class StopStringCriteria;
  explicit Tokenizer(std::shared_ptr<const detail::TokenizerPipeline> pipeline);

  std::shared_ptr<const detail::TokenizerPipeline> pipeline_;
};

/// The tokenizer of a Hugging Face directory (tokenizer.json and
/// tokenizer_config.json), as transformers 5.23's AutoTokenizer reads it.
/// Throws `c10::Error` naming the file for a missing or malformed file, and
/// naming the component and the supported ones for a component not built yet.
Tokenizer load_hf_tokenizer(const std::string& directory);

/// A sequence's text as its tokens arrive, for streaming: `push` takes the
/// next id and returns the text it completes, holding back what later tokens
/// may still change (bytes of a character not complete yet, which would
/// decode as U+FFFD; a run of `<0xXX>` byte tokens; with
/// `clean_up_tokenization_spaces`, the last character or the few a clean-up
/// pattern such as " n't" could still join); `finish` returns the rest. The
/// pieces join to `decode` of all the ids. Each push decodes only the tokens
/// since the last piece and the ones before it (tokenizers' `DecodeStream`
/// window), so a sequence of any length streams in linear time.
///
/// Example:
/// ```
/// mha::DecodeStream stream(mha::load_hf_tokenizer("path/to/gpt2"), true);
/// for (int64_t id : {40, 308, 506}) std::cout << stream.push(id) << std::flush;
/// std::cout << stream.finish() << "\n";
/// ```
class DecodeStream {
 public:
  /// Decodes with `tokenizer`; `skip_special_tokens` as in `decode`.
  explicit DecodeStream(Tokenizer tokenizer, bool skip_special_tokens = false);
  /// The text `id` completes (often empty while a character is incomplete).
  std::string push(int64_t id);
  /// The text held back: what `decode` of all the ids has beyond the pieces.
  std::string finish();

 private:
  /// The text before clean-up that the window's new tokens add ("" while held).
  std::string step(bool final);
  /// `text` (before clean-up) appended to what is held; the part no later
  /// text can change, cleaned up (all of it when `final`).
  std::string cleaned(std::string text, bool final);

  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  std::vector<int64_t> window_;  ///< the ids since the last piece's first token
  size_t context_ = 0;           ///< window_'s first tokens, whose text is given
  std::string context_text_;     ///< their text, decoded alone (before clean-up)
  std::string held_;             ///< text given by `step` not yet cleaned up
};

}  // namespace mha
