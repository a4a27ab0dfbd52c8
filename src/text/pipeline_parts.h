#pragma once

// Private: the four kinds of component of a tokenizer.json pipeline, in the
// order they run (tokenizers/src/tokenizer/mod.rs): a normalizer, a
// pre-tokenizer, a model, and, back from ids to text, a decoder. Each
// component of tokenizer.json implements one of them.

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "text/alignment.h"

namespace mha {
namespace detail {

/// Rewrites text before it is split (lowercasing, accents, Unicode forms).
class Normalizer {
 public:
  virtual ~Normalizer() = default;
  /// `text` (valid UTF-8) normalized.
  virtual std::string normalize(const std::string& text) const = 0;
  /// `text` normalized as `normalize` does, and `origin` (one entry per byte
  /// of `text`) with it, as tokenizers aligns each change.
  virtual void normalize_aligned(std::string& text, Alignment& origin) const = 0;
};

/// A piece of a sequence's normalized text on its way through the
/// pre-tokenizers: its bytes, whether it begins where the sequence's text
/// begins (Metaspace's "first" scheme asks), and, where offsets are tracked,
/// each byte's origin in the text the caller gave.
struct TextPiece {
  std::string text;
  bool at_start = false;
  Alignment origin;
};

/// Splits normalized text into the words the model tokenizes.
class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  /// Appends `piece`'s pieces to `out`, in order.
  virtual void split(const TextPiece& piece, std::vector<TextPiece>& out) const = 0;
  /// Each of `pieces` split, the empty results left out (tokenizers'
  /// `PreTokenizedString::split`).
  std::vector<TextPiece> pre_tokenize(const std::vector<TextPiece>& pieces) const;
};

/// `prefix` before `piece`'s text (its origin aligned, if tracked).
inline void prepend_aligned(TextPiece& piece, const std::string& prefix) {
  prepend_aligned(piece.text, piece.origin, prefix);
}

/// Appends `piece`'s byte ranges `ranges` to `out` as pieces.
void append_ranges(const TextPiece& piece,
                   const std::vector<std::pair<size_t, size_t>>& ranges,
                   std::vector<TextPiece>& out);

/// Each token's bytes [first, second) in the word it came from.
using Spans = std::vector<std::pair<uint32_t, uint32_t>>;

/// Turns a word into token ids (BPE, WordPiece), and holds the vocabulary.
class TokenModel {
 public:
  virtual ~TokenModel() = default;
  /// Appends `word`'s token ids to `ids` and, unless null, their bytes in
  /// `word` to `spans` (tokenizers' `Token::offsets`).
  virtual void tokenize(const std::string& word, std::vector<int64_t>& ids, Spans* spans) const = 0;
  /// The token of `id`, or null.
  virtual const std::string* id_to_token(int64_t id) const = 0;
  /// The id of `token`, if in the vocabulary.
  virtual std::optional<int64_t> token_to_id(const std::string& token) const = 0;
  /// The vocabulary's size (its largest id + 1).
  virtual int64_t size() const = 0;
  /// The prefix of a word's continuing pieces ("##" for WordPiece), or "".
  virtual const std::string& continuing_subword_prefix() const {
    static const std::string none;
    return none;
  }
};

/// Joins tokens back into text.
class Decoder {
 public:
  virtual ~Decoder() = default;
  /// `tokens` rewritten (tokenizers' `decode_chain`): a sequence of decoders
  /// passes the result on.
  virtual std::vector<std::string> decode_chain(std::vector<std::string> tokens) const = 0;
  /// The text of `tokens`: the chain's result joined.
  std::string decode(std::vector<std::string> tokens) const;
  /// Appends this decoder and, for a sequence, its steps (in order) to `out`.
  virtual void parts(std::vector<const Decoder*>& out) const { out.push_back(this); }
};

/// The vocabulary of a tokenizer.json model: token -> id, and id -> token.
class Vocabulary {
 public:
  /// Throws `c10::Error` for an id outside [0, 2^31).
  explicit Vocabulary(std::unordered_map<std::string, int64_t> ids);
  const std::string* token(int64_t id) const {
    return id >= 0 && id < size() ? &tokens_[id] : nullptr;
  }
  std::optional<int64_t> id(const std::string& token) const {
    const auto found = ids_.find(token);
    if (found == ids_.end()) return std::nullopt;
    return found->second;
  }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  std::unordered_map<std::string, int64_t> ids_;
  std::vector<std::string> tokens_;  // by id
};

/// A model over a `Vocabulary`: the lookups every model shares.
class VocabularyModel : public TokenModel {
 public:
  explicit VocabularyModel(std::unordered_map<std::string, int64_t> vocab)
      : vocab_(std::move(vocab)) {}
  const std::string* id_to_token(int64_t id) const override { return vocab_.token(id); }
  std::optional<int64_t> token_to_id(const std::string& token) const override {
    return vocab_.id(token);
  }
  int64_t size() const override { return vocab_.size(); }

 protected:
  Vocabulary vocab_;
};

}  // namespace detail
}  // namespace mha
