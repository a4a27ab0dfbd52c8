// mha::TokenClassificationPipeline: transformers 5.23's
// pipelines/token_classification.py (preprocess's windows with `stride`,
// gather_pre_entities, aggregate, aggregate_words, group_entities,
// aggregate_overlapping_entities); entity_groups.cpp groups.

#include <c10/util/Exception.h>
#include <mha/pipelines.h>

#include <algorithm>

#include "pipelines/batches.h"
#include "pipelines/entity_groups.h"
#include "text/utf8.h"

namespace mha {

namespace detail {
namespace {

/// Whether the token at characters [start, end) continues a word: by the
/// model's continuing-subword prefix where it has one (the token's text is
/// longer than the characters it covers), else transformers' heuristic (no
/// space just before or at it).
bool is_subword(const Tokenizer& tokenizer,
                const std::string& token,
                const std::string& text,
                const std::vector<size_t>& starts,
                int64_t start,
                int64_t end) {
  if (!tokenizer.continuing_subword_prefix().empty()) {
    return static_cast<int64_t>(count_chars(token)) != end - start;
  }
  const auto chars = static_cast<int64_t>(starts.size()) - 1;
  if (start <= 0) return false;
  for (int64_t c = start - 1; c <= std::min(start, chars - 1); ++c) {
    if (text[starts[static_cast<size_t>(c)]] == ' ') return false;
  }
  return true;
}

/// gather_pre_entities: each token that is not a special token, its scores and characters.
std::vector<PreEntity> pre_entities(const Tokenizer& tokenizer,
                                    const std::string& text,
                                    const EncodedText& encoded,
                                    const torch::Tensor& scores) {  // (L, labels) float32
  const std::vector<size_t> starts = char_starts(text);
  std::vector<PreEntity> out;
  for (size_t i = 0; i < encoded.input_ids.size(); ++i) {
    if (encoded.special_tokens_mask[i] != 0) continue;
    const int64_t id = encoded.input_ids[i];
    const auto [start, end] = encoded.offset_mapping[i];
    PreEntity e;
    e.word = tokenizer.id_to_token(id).value_or("");
    const torch::Tensor row = scores[static_cast<int64_t>(i)].contiguous();
    e.scores.assign(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
    e.start = start;
    e.end = end;
    e.index = static_cast<int64_t>(i);
    e.is_subword = is_subword(tokenizer, e.word, text, starts, start, end);
    if (id == tokenizer.unk_token_id()) {  // the text it stood for
      e.word = characters(text, starts, start, end);
      e.is_subword = false;
    }
    out.push_back(std::move(e));
  }
  return out;
}

bool ignored(const Entity& e, const std::vector<std::string>& ignore_labels) {
  return std::find(ignore_labels.begin(), ignore_labels.end(), e.label) != ignore_labels.end();
}

}  // namespace
}  // namespace detail

std::vector<std::vector<EncodedText>> TokenClassificationPipeline::windows(
    const std::vector<std::string>& texts, const TokenClassificationOptions& options) const {
  std::vector<std::vector<EncodedText>> out;
  if (!options.stride()) {
    for (EncodedText& row : detail::encode_for_model(tokenizer_, texts, /*truncation=*/true)) {
      out.push_back({std::move(row)});
    }
    return out;
  }
  const int64_t stride = *options.stride();
  const std::optional<int64_t> limit = tokenizer_.model_max_length();
  TORCH_CHECK_VALUE(options.aggregation_strategy() != AggregationStrategy::kNone,
                    "TokenClassificationPipeline: `stride` was provided to process all the text "
                    "but `aggregation_strategy=\"none\"`, please select another one instead.");
  TORCH_CHECK_VALUE(stride >= 0 && (!limit || stride < *limit),
                    "TokenClassificationPipeline: `stride` must be less than "
                    "`tokenizer.model_max_length` (or even lower if the tokenizer adds special "
                    "tokens): expected 0 <= stride < ",
                    limit.value_or(0), ", but got ", stride);
  EncodeOptions encode;
  if (limit) encode.truncation(Truncation::kLongestFirst).max_length(*limit).stride(stride);
  for (const std::string& text : texts) {
    out.push_back(tokenizer_.encode_overflowing_with_offsets(text, std::nullopt, encode));
  }
  return out;
}

std::vector<std::vector<Entity>> TokenClassificationPipeline::operator()(
    const std::vector<std::string>& texts, const TokenClassificationOptions& options) const {
  const std::vector<std::vector<EncodedText>> per_text = windows(texts, options);
  std::vector<EncodedText> rows;  // every text's windows, in order
  std::vector<size_t> text_of;    // each row's text
  for (size_t i = 0; i < per_text.size(); ++i) {
    rows.insert(rows.end(), per_text[i].begin(), per_text[i].end());
    text_of.insert(text_of.end(), per_text[i].size(), i);
  }
  const detail::EntityGrouping grouping{tokenizer_, model_->options.id2label()};
  std::vector<std::vector<Entity>> out(texts.size());
  detail::for_each_batch(rows.size(), options.batch_size(), [&](size_t begin, size_t end) {
    const torch::Tensor scores = detail::pipeline_softmax(
        detail::run_padded(model_, rows, begin, end, tokenizer_.pad_token_id().value_or(0))
            .logits);  // (B, L, labels)
    for (size_t r = begin; r < end; ++r) {
      const size_t i = text_of[r];
      const auto pre = detail::pre_entities(tokenizer_, texts[i], rows[r],
                                            scores[static_cast<int64_t>(r - begin)]);
      for (Entity& e : grouping.aggregate(pre, options.aggregation_strategy())) {
        if (!detail::ignored(e, options.ignore_labels())) out[i].push_back(std::move(e));
      }
    }
  });
  for (size_t i = 0; i < texts.size(); ++i) {
    if (per_text[i].size() > 1) out[i] = detail::without_overlaps(std::move(out[i]));
  }
  return out;
}

}  // namespace mha
