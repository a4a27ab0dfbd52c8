// mha::QuestionAnsweringPipeline: transformers 4.x's
// pipelines/question_answering.py (preprocess's windows and p_mask;
// select_starts_ends and decode_spans; postprocess and get_indices),
// the task transformers 5.x's pipeline() no longer has.

#include <c10/util/Exception.h>
#include <mha/pipelines.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "pipelines/batches.h"

namespace mha {

using torch::Tensor;

namespace {

/// A candidate span of a window's tokens [start, end] and its score.
struct Span {
  int64_t start;
  int64_t end;
  float score;
};

/// select_starts_ends + decode_spans on one window: the start and end
/// probabilities over the tokens that may answer (`allowed`; the rest
/// -10000 before the softmax), the first token's product kept in
/// `min_null_score`, then the `top_k` best spans of at most `max_answer_len`
/// tokens (decode_spans keeps a span whose ends are allowed or the first
/// token: it reads the row index of a (1, L) mask's nonzero() too).
std::vector<Span> window_spans(const Tensor& start_logits,  // (L)
                               const Tensor& end_logits,    // (L)
                               const Tensor& allowed,       // (L) bool
                               const QuestionAnsweringOptions& options,
                               float& min_null_score) {
  const auto probabilities = [&](const Tensor& logits) {
    const Tensor x = torch::where(allowed, logits.to(torch::kFloat32), torch::full({}, -10000.0f));
    const Tensor e = (x - x.max()).exp();
    return e / e.sum();  // (L)
  };
  Tensor start = probabilities(start_logits), end = probabilities(end_logits);
  if (options.handle_impossible_answer()) {
    min_null_score = std::min(min_null_score, (start[0] * end[0]).item<float>());
  }
  start[0] = 0.0f;  // the first token (CLS) is no answer's end
  end[0] = 0.0f;
  const int64_t length = start.size(0);
  const Tensor candidates =  // (L, L): 0 <= end - start < max_answer_len
      (start.unsqueeze(1) * end.unsqueeze(0)).triu().tril(options.max_answer_len() - 1);
  const Tensor flat = candidates.flatten();
  Tensor order;  // the best first
  if (options.top_k() == 1) {
    order = flat.argmax().unsqueeze(0);
  } else {
    order = std::get<1>(flat.topk(std::min(options.top_k(), flat.numel())));
  }
  const auto kept = allowed.clone();
  kept[0] = true;
  std::vector<Span> spans;
  for (int64_t i = 0; i < order.numel(); ++i) {
    const int64_t index = order[i].item<int64_t>();
    const int64_t s = index / length, e = index % length;
    if (kept[s].item<bool>() && kept[e].item<bool>()) {
      spans.push_back({s, e, flat[index].item<float>()});
    }
  }
  return spans;
}

/// The windows' tokens of each (question, context): transformers' preprocess.
struct Windows {
  std::vector<EncodedText> rows;
  std::vector<size_t> example;  ///< the example of each row
};

Windows windows_of(const Tokenizer& tokenizer,
                   const std::vector<std::string>& questions,
                   const std::vector<std::string>& contexts,
                   int64_t max_seq_len,
                   int64_t doc_stride) {
  const auto options = EncodeOptions()
                           .truncation(Truncation::kOnlySecond)
                           .max_length(max_seq_len)
                           .stride(doc_stride);
  Windows out;
  for (size_t i = 0; i < questions.size(); ++i) {
    for (EncodedText& row :
         tokenizer.encode_overflowing_with_offsets(questions[i], contexts[i], options)) {
      out.rows.push_back(std::move(row));
      out.example.push_back(i);
    }
  }
  return out;
}

/// The characters of the context's word `word` in `row`: from its first
/// token's start to its last token's end (tokenizers' word_to_chars), or none
/// where the context has no such word.
std::optional<std::pair<int64_t, int64_t>> word_chars(const EncodedText& row, int64_t word) {
  std::optional<size_t> first;
  size_t last = 0;
  for (size_t t = 0; t < row.word_ids.size(); ++t) {
    if (row.sequence_ids[t] != 1 || row.word_ids[t] != word) continue;
    if (!first) first = t;
    last = t;
  }
  if (!first) return std::nullopt;
  return std::make_pair(row.offset_mapping[*first].first, row.offset_mapping[last].second);
}

/// The context's characters [first, last) of `span`: its tokens' offsets, or
/// with `align_to_words` its first and last tokens' whole words
/// (get_indices; where either token has no word in the context, such as the
/// first token, the offsets, as its `except` keeps them).
std::pair<int64_t, int64_t> span_chars(const EncodedText& row,
                                       const Span& span,
                                       bool align_to_words) {
  const auto s = static_cast<size_t>(span.start), e = static_cast<size_t>(span.end);
  if (align_to_words) {
    const auto start = word_chars(row, row.word_ids[s]), end = word_chars(row, row.word_ids[e]);
    if (start && end) return {start->first, end->second};
  }
  return {row.offset_mapping[s].first, row.offset_mapping[e].second};
}

/// p_mask inverted: the context's tokens and the CLS token may answer. (L) bool.
Tensor allowed_tokens(const EncodedText& row, std::optional<int64_t> cls_id) {
  Tensor allowed = torch::zeros({static_cast<int64_t>(row.input_ids.size())}, torch::kBool);
  for (size_t t = 0; t < row.input_ids.size(); ++t) {
    if (row.sequence_ids[t] == 1 || row.input_ids[t] == cls_id)
      allowed[static_cast<int64_t>(t)] = true;
  }
  return allowed;
}

}  // namespace

std::vector<std::vector<Answer>> QuestionAnsweringPipeline::operator()(
    const std::vector<std::string>& questions,
    const std::vector<std::string>& contexts,
    const QuestionAnsweringOptions& options) const {
  TORCH_CHECK_VALUE(
      options.top_k() > 0 && options.max_answer_len() > 0,
      "QuestionAnsweringPipeline: expected top_k and max_answer_len positive, but got ",
      options.top_k(), " and ", options.max_answer_len());
  detail::check_one_each("QuestionAnsweringPipeline", "question", questions.size(), "context",
                         contexts.size());
  const int64_t max_seq_len =
      options.max_seq_len() > 0
          ? options.max_seq_len()
          : std::min<int64_t>(384, tokenizer_.model_max_length().value_or(384));
  const int64_t doc_stride =
      options.doc_stride() > 0 ? options.doc_stride() : std::min<int64_t>(max_seq_len / 2, 128);
  TORCH_CHECK_VALUE(doc_stride < max_seq_len, "QuestionAnsweringPipeline: doc_stride (", doc_stride,
                    ") is larger than max_seq_len (", max_seq_len, ")");
  const Windows windows = windows_of(tokenizer_, questions, contexts, max_seq_len, doc_stride);
  std::vector<std::vector<Answer>> out(questions.size());
  std::vector<float> min_null(questions.size(), 1000000.0f);
  std::vector<std::vector<size_t>> context_chars(contexts.size());
  detail::for_each_batch(windows.rows.size(), options.batch_size(), [&](size_t begin, size_t end) {
    const TaskModelOutput logits =
        detail::run_padded(model_, windows.rows, begin, end, tokenizer_.pad_token_id().value_or(0));
    for (size_t w = begin; w < end; ++w) {
      const EncodedText& row = windows.rows[w];
      const size_t i = windows.example[w];
      if (context_chars[i].empty()) context_chars[i] = detail::char_starts(contexts[i]);
      const auto r = static_cast<int64_t>(w - begin);
      const auto n = static_cast<int64_t>(row.input_ids.size());
      for (const Span& span : window_spans(
               logits.start_logits[r].narrow(0, 0, n), logits.end_logits[r].narrow(0, 0, n),
               allowed_tokens(row, tokenizer_.cls_token_id()), options, min_null[i])) {
        const auto [first, last] = span_chars(row, span, options.align_to_words());
        out[i].push_back({span.score, first, last,
                          detail::characters(contexts[i], context_chars[i], first, last)});
      }
    }
  });
  for (size_t i = 0; i < out.size(); ++i) {
    if (options.handle_impossible_answer()) out[i].push_back({min_null[i], 0, 0, ""});
    std::stable_sort(out[i].begin(), out[i].end(),
                     [](const Answer& a, const Answer& b) { return a.score > b.score; });
    if (static_cast<int64_t>(out[i].size()) > options.top_k())
      out[i].resize(static_cast<size_t>(options.top_k()));
  }
  return out;
}

}  // namespace mha
