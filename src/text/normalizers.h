#pragma once

// Private: tokenizers' general normalizers (tokenizers/src/normalizers/):
// Unicode forms, lowercase, accents, stripping, replacing, prepending, and a
// sequence of them. BERT's own is in bert_text.h.

#include <memory>
#include <string>
#include <vector>

#include "text/pattern.h"
#include "text/pipeline_parts.h"
#include "text/unicode_classes.h"

namespace mha {
namespace detail {

/// `NFC`, `NFD`, `NFKC`, `NFKD`.
class UnicodeFormNormalizer final : public Normalizer {
 public:
  explicit UnicodeFormNormalizer(UnicodeForm form) : form_(form) {}
  std::string normalize(const std::string& text) const override;
  void normalize_aligned(std::string& text, Alignment& origin) const override;

 private:
  UnicodeForm form_;
};

/// `Lowercase`: each character's full lowercase mapping.
class LowercaseNormalizer final : public Normalizer {
 public:
  std::string normalize(const std::string& text) const override;
  void normalize_aligned(std::string& text, Alignment& origin) const override;
};

/// `StripAccents`: combining marks (general category M) removed.
class StripAccentsNormalizer final : public Normalizer {
 public:
  std::string normalize(const std::string& text) const override;
  void normalize_aligned(std::string& text, Alignment& origin) const override;
};

/// `Strip`: whitespace removed from the left and/or the right.
class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(const std::string& text) const override;
  void normalize_aligned(std::string& text, Alignment& origin) const override;

 private:
  bool left_, right_;
};

/// `Replace`: each match of a pattern replaced by `content`.
class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(const std::string& text) const override;
  void normalize_aligned(std::string& text, Alignment& origin) const override;

 private:
  Pattern pattern_;
  std::string content_;
};

/// `Prepend`: `prefix` before a text that is not empty.
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(const std::string& text) const override;
  void normalize_aligned(std::string& text, Alignment& origin) const override;

 private:
  std::string prefix_;
};

/// `Sequence`: each normalizer in turn.
class NormalizerSequence final : public Normalizer {
 public:
  explicit NormalizerSequence(std::vector<std::unique_ptr<const Normalizer>> normalizers)
      : normalizers_(std::move(normalizers)) {}
  std::string normalize(const std::string& text) const override;
  void normalize_aligned(std::string& text, Alignment& origin) const override;

 private:
  std::vector<std::unique_ptr<const Normalizer>> normalizers_;
};

/// `text`'s characters each as `lowercase` gives them.
std::u32string lowercase_chars(char32_t c);

/// `text` in `form`, `origin` aligned: each run of a character and the marks
/// (or Hangul jamo) after it changes as one (tokenizers' rule for a replaced
/// run, `append_replacement`), or the whole text as one where a form
/// composes across runs.
void unicode_form_aligned(std::string& text, Alignment& origin, UnicodeForm form);

/// `text` with each match of `pattern` replaced by `content` (the Replace
/// normalizer's and decoder's rule).
std::string replace_matches(const Pattern& pattern,
                            const std::string& text,
                            const std::string& content);

}  // namespace detail
}  // namespace mha
