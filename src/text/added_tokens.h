#pragma once

// Private: tokenizer.json's added tokens (special tokens such as
// `<|endoftext|>`, and tokens added by users): found in the text before the
// pipeline runs, each one token whatever the model would make of it
// (tokenizers/src/tokenizer/added_vocabulary.rs).

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace mha {
namespace detail {

/// One added token of tokenizer.json's "added_tokens".
struct AddedToken {
  std::string content;
  int64_t id = 0;
  bool special = false;
  bool normalized = false;   ///< found in the normalized text (else in the raw text)
  bool lstrip = false;       ///< takes the whitespace before it
  bool rstrip = false;       ///< takes the whitespace after it
  bool single_word = false;  ///< only where no word character touches it
};

/// A piece of a text: an added token (`id` set), or text for the pipeline.
struct TextSegment {
  size_t begin = 0, end = 0;  ///< bytes of the text
  std::optional<int64_t> id;
};

/// The added tokens of a tokenizer.
class AddedTokens {
 public:
  explicit AddedTokens(std::vector<AddedToken> tokens);

  /// `text` split at its added tokens whose `normalized` flag is
  /// `normalized`, leftmost first and longest among those that start at one
  /// place (tokenizers' leftmost-longest match), an lstrip/rstrip token taking
  /// the whitespace beside it; a `single_word` match that touches a word
  /// character is not taken, nor is any token inside it.
  std::vector<TextSegment> split(const std::string& text, bool normalized) const;
  /// The added token of `id`, or null.
  const AddedToken* find(int64_t id) const;
  /// The id of the added token `content`, if any.
  std::optional<int64_t> id_of(const std::string& content) const;
  /// The largest id + 1, 0 without added tokens.
  int64_t end_id() const { return end_id_; }

 private:
  /// The longest token of `normalized` that starts at byte `at` of `text`, or null.
  const AddedToken* longest_at(const std::string& text, size_t at, bool normalized) const;

  std::vector<AddedToken> tokens_;
  /// By first byte: the tokens (indices) that start with it, longest first.
  std::array<std::vector<size_t>, 256> by_first_byte_;
  std::unordered_map<int64_t, size_t> by_id_;
  int64_t end_id_ = 0;
};

}  // namespace detail
}  // namespace mha
