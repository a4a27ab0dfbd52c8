#pragma once

// Private: tokenizers' general pre-tokenizers (tokenizers/src/pre_tokenizers/):
// a pattern's split, whitespace, SentencePiece's Metaspace, punctuation,
// digits, and a sequence of them. BERT's and ByteLevel's have files of their own.

#include <memory>
#include <string>
#include <vector>

#include "text/pattern.h"
#include "text/pipeline_parts.h"

namespace mha {
namespace detail {

/// `Split`: a pattern's matches kept or removed as `behavior` says.
class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Pattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void split(const TextPiece& piece, std::vector<TextPiece>& out) const override;

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

/// `Whitespace`: runs of word characters and runs of other non-space
/// characters (`\w+|[^\w\s]+`, Rust regex's Unicode `\w`); spaces dropped.
class WhitespacePreTokenizer final : public PreTokenizer {
 public:
  WhitespacePreTokenizer();
  void split(const TextPiece& piece, std::vector<TextPiece>& out) const override;

 private:
  Pattern words_;
};

/// A split at the characters of a class: `WhitespaceSplit` (whitespace,
/// removed), `Punctuation` (ASCII and Unicode punctuation, as `behavior`
/// says), `Digits` (numeric characters, each alone or in runs).
class CharClassPreTokenizer final : public PreTokenizer {
 public:
  CharClassPreTokenizer(bool (*in_class)(char32_t), SplitBehavior behavior)
      : in_class_(in_class), behavior_(behavior) {}
  void split(const TextPiece& piece, std::vector<TextPiece>& out) const override;

 private:
  bool (*in_class_)(char32_t);
  SplitBehavior behavior_;
};

/// Rust's `is_ascii_punctuation || is_punctuation` (tokenizers' Punctuation).
bool is_any_punctuation(char32_t c);

/// Where Metaspace puts its replacement before a piece.
enum class PrependScheme { kAlways, kFirst, kNever };

/// `PrependScheme` of tokenizer.json's "always", "first", "never".
PrependScheme prepend_scheme(const std::string& name);

/// `Metaspace` (SentencePiece's): spaces become `replacement` (U+2581), one
/// is prepended as `scheme` says (`kFirst`: only where the sequence begins),
/// and with `split` each replacement begins a new piece.
class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void split(const TextPiece& piece, std::vector<TextPiece>& out) const override;

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

/// `Sequence`: each pre-tokenizer in turn on all pieces.
class PreTokenizerSequence final : public PreTokenizer {
 public:
  explicit PreTokenizerSequence(std::vector<std::unique_ptr<const PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void split(const TextPiece& piece, std::vector<TextPiece>& out) const override;

 private:
  std::vector<std::unique_ptr<const PreTokenizer>> steps_;
};

}  // namespace detail
}  // namespace mha
