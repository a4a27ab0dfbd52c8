// transformers' StopStringCriteria (transformers/generation/stopping_criteria.py):
// its tensor program precomputes, for each token, where its text can sit in
// a stop string; what it decides is whether the stop string occurs in the
// text of the newest tokens (within its window) ending inside the newest
// token's text. That is what this checks, on the same token texts.

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "mha/stopping_criteria.h"
#include "text/token_texts.h"
#include "text/utf8.h"

namespace mha {

namespace {

/// The characters of valid UTF-8 `text`.
int64_t count_chars(const std::string& text) {
  int64_t count = 0;
  for (const char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

/// Whether some token's text can end `stop` (transformers' end overlap): a
/// prefix of the text that ends with the stop string's end.
bool some_token_ends(const std::string& stop,
                     const std::vector<std::optional<std::string>>& texts) {
  for (const auto& text : texts) {
    if (!text) continue;
    for (size_t k = 1; k <= text->size(); ++k) {
      const size_t overlap = std::min(k, stop.size());
      if (text->compare(k - overlap, overlap, stop, stop.size() - overlap, overlap) == 0)
        return true;
    }
  }
  return false;
}

}  // namespace

StopStringCriteria::StopStringCriteria(const Tokenizer& tokenizer,
                                       std::vector<std::string> stop_strings)
    : stop_strings_(std::move(stop_strings)) {
  TORCH_CHECK_VALUE(!stop_strings_.empty(),
                    "StopStringCriteria: expected at least one stop string, but got none");
  detail::TokenTexts texts = detail::token_texts(*tokenizer.pipeline_);
  token_texts_ = std::move(texts.by_id);
  bool some_can_end = false;  // transformers refuses only when none can
  for (const std::string& stop : stop_strings_) {
    detail::check_utf8(stop, "StopStringCriteria: a stop string");
    TORCH_CHECK_VALUE(!stop.empty(), "StopStringCriteria: expected non-empty stop strings");
    some_can_end = some_can_end || some_token_ends(stop, token_texts_);
    window_ = std::max(window_,
                       texts.counts_bytes ? static_cast<int64_t>(stop.size()) : count_chars(stop));
  }
  TORCH_CHECK_VALUE(some_can_end,
                    "Stop string preprocessing was unable to identify tokens matching one or more "
                    "of the supplied stop string(s). This is most often caused by the stop strings "
                    "containing unusual characters that are not in the tokenizer vocabulary.");
}

bool StopStringCriteria::row_stops(const int64_t* row, int64_t length) const {
  // The newest tokens' text, from after the newest id without a token.
  std::vector<const std::string*> window;
  for (int64_t i = length - 1; i >= std::max<int64_t>(0, length - window_); --i) {
    const bool known = row[i] >= 0 && row[i] < static_cast<int64_t>(token_texts_.size()) &&
                       token_texts_[row[i]].has_value();
    if (!known) break;
    window.push_back(&*token_texts_[row[i]]);
  }
  if (window.empty()) return false;
  std::string text;
  for (auto t = window.rbegin(); t != window.rend(); ++t) text += **t;
  const size_t newest_begin = text.size() - window.front()->size();
  for (const std::string& stop : stop_strings_) {
    // An occurrence that ends past `newest_begin`, at most at the text's end.
    const size_t from = newest_begin + 1 >= stop.size() ? newest_begin + 1 - stop.size() : 0;
    if (text.find(stop, from) != std::string::npos) return true;
  }
  return false;
}

torch::Tensor StopStringCriteria::operator()(const torch::Tensor& input_ids,
                                             const torch::Tensor& /*scores*/) const {
  TORCH_CHECK_VALUE(input_ids.dim() == 2 && input_ids.scalar_type() == at::kLong,
                    "StopStringCriteria: expected input_ids of shape (rows, t) int64, but got ",
                    input_ids.sizes(), " ", input_ids.scalar_type());
  const torch::Tensor ids = input_ids.contiguous();          // (rows, t)
  torch::Tensor done = at::zeros({ids.size(0)}, at::kBool);  // (rows)
  auto rows = done.accessor<bool, 1>();
  for (int64_t r = 0; r < ids.size(0); ++r) {
    rows[r] = row_stops(ids.data_ptr<int64_t>() + r * ids.size(1), ids.size(1));
  }
  return done;
}

}  // namespace mha
