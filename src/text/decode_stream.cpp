// mha::DecodeStream (mha/tokenizer.h): tokenizers' DecodeStream window
// (tokenizers/src/tokenizer/mod.rs, step_decode_stream): each step decodes the
// ids since the last piece's first token, and the text beyond what those
// first tokens decode to alone is new. Then transformers' clean-up of spaces,
// run on the text up to a point no later text can change.

#include <c10/util/Exception.h>
#include <mha/tokenizer.h>

#include <string>
#include <utility>
#include <vector>

#include "text/tokenizer_pipeline.h"
#include "text/word_piece.h"

namespace mha {

namespace {

const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool ends_with_replacement(const std::string& text) {
  return text.size() >= kReplacement.size() &&
         text.compare(text.size() - kReplacement.size(), kReplacement.size(), kReplacement) == 0;
}

}  // namespace

DecodeStream::DecodeStream(Tokenizer tokenizer, bool skip_special_tokens)
    : tokenizer_(std::move(tokenizer)), skip_special_tokens_(skip_special_tokens) {}

std::string DecodeStream::push(int64_t id) {
  window_.push_back(id);
  // A run of byte tokens waits for its end: if its bytes turn out not UTF-8,
  // each is U+FFFD, and the text of its first bytes would change.
  if (tokenizer_.pipeline_->fallback_byte_of(id) >= 0) return "";
  return cleaned(step(/*final=*/false), /*final=*/false);
}

std::string DecodeStream::finish() { return cleaned(step(/*final=*/true), /*final=*/true); }

std::string DecodeStream::step(bool final) {
  const std::string text = tokenizer_.pipeline_->decode_uncleaned(window_, skip_special_tokens_);
  // A trailing U+FFFD: a character whose bytes are still arriving.
  if (!final && (text.size() <= context_text_.size() || ends_with_replacement(text))) return "";
  TORCH_CHECK(text.compare(0, context_text_.size(), context_text_) == 0,
              "DecodeStream: the text of the window [", context_, " tokens given, ",
              window_.size() - context_, " new] no longer starts with the text given (\"",
              context_text_, "\" vs \"", text, "\"); decode the whole sequence instead");
  std::string piece = text.substr(context_text_.size());
  // The next window: the tokens this piece came from, their text decoded alone.
  window_.erase(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(context_));
  context_ = window_.size();
  context_text_ = tokenizer_.pipeline_->decode_uncleaned(window_, skip_special_tokens_);
  return piece;
}

std::string DecodeStream::cleaned(std::string text, bool final) {
  if (!tokenizer_.pipeline_->clean_up_tokenization_spaces) return text;
  held_ += text;
  const size_t split = final ? held_.size() : detail::clean_up_split_point(held_);
  std::string piece = detail::clean_up_tokenization(held_.substr(0, split), /*do_not=*/false);
  held_.erase(0, split);
  return piece;
}

}  // namespace mha
