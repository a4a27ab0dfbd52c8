// mha::Tokenizer: the public face of a TokenizerPipeline (text/tokenizer_pipeline.h).

#include "mha/tokenizer.h"

#include <c10/util/Exception.h>
#include <torch/types.h>

#include "common/parallel_items.h"
#include "text/token_offsets.h"
#include "text/tokenizer_files.h"
#include "text/truncation.h"
#include "text/utf8.h"

namespace mha {

namespace {

/// `rows` padded to `length` with the pad token on the configured side.
TokenizedBatch padded_batch(const std::vector<std::vector<int64_t>>& rows,
                            int64_t length,
                            const detail::TokenizerPipeline& pipeline) {
  const auto n = static_cast<int64_t>(rows.size());
  TokenizedBatch batch{torch::full({n, length}, pipeline.pad_id.value_or(0), torch::kLong),
                       torch::zeros({n, length}, torch::kLong),
                       torch::Tensor()};  // (N, L) each; offsets: none yet
  for (int64_t i = 0; i < n; ++i) {
    const auto count = static_cast<int64_t>(rows[i].size());
    const int64_t start = pipeline.pad_left ? length - count : 0;
    batch.input_ids[i].narrow(0, start, count).copy_(torch::tensor(rows[i], torch::kLong));
    batch.attention_mask[i].narrow(0, start, count).fill_(1);
  }
  return batch;
}

/// `rows` (each token's characters) padded as `padded_batch` pads ids, with (0, 0).
torch::Tensor padded_offsets(const std::vector<std::vector<std::pair<int64_t, int64_t>>>& rows,
                             int64_t length,
                             bool pad_left) {
  const auto n = static_cast<int64_t>(rows.size());
  torch::Tensor out = torch::zeros({n, length, 2}, torch::kLong);  // (N, L, 2)
  auto at = out.accessor<int64_t, 3>();
  for (int64_t i = 0; i < n; ++i) {
    const auto count = static_cast<int64_t>(rows[i].size());
    const int64_t start = pad_left ? length - count : 0;
    for (int64_t t = 0; t < count; ++t) {
      at[i][start + t][0] = rows[i][t].first;
      at[i][start + t][1] = rows[i][t].second;
    }
  }
  return out;
}

}  // namespace

Tokenizer::Tokenizer(std::shared_ptr<const detail::TokenizerPipeline> pipeline)
    : pipeline_(std::move(pipeline)) {}

Tokenizer load_hf_tokenizer(const std::string& directory) {
  return Tokenizer(detail::read_tokenizer_directory(directory));
}

int64_t Tokenizer::sequence_budget(bool pair, const EncodeOptions& options) const {
  TORCH_CHECK_VALUE(options.truncation() == Truncation::kNone || options.max_length() > 0,
                    "EncodeOptions: truncation needs max_length > 0, but got max_length ",
                    options.max_length());
  // tokenizers' post_process: the special tokens count towards max_length.
  const int64_t added =
      options.add_special_tokens() ? pipeline_->post_processor.added_tokens(pair) : 0;
  return std::max<int64_t>(options.max_length() - added, 0);
}

std::vector<int64_t> Tokenizer::with_specials(const std::vector<int64_t>& a,
                                              const std::vector<int64_t>* b,
                                              const EncodeOptions& options) const {
  if (options.add_special_tokens()) return pipeline_->post_processor.apply(a, b);
  std::vector<int64_t> ids = a;
  if (b != nullptr) ids.insert(ids.end(), b->begin(), b->end());
  return ids;
}

std::vector<int64_t> Tokenizer::truncated_with_specials(std::vector<int64_t> a,
                                                        std::vector<int64_t>* b,
                                                        const EncodeOptions& options) const {
  detail::truncate_sequences(a, b, sequence_budget(b != nullptr, options), options.truncation(),
                             pipeline_->truncate_left);
  return with_specials(a, b, options);
}

namespace {

/// Both sides' ids and character offsets (the text's first) and, per side,
/// a negative mark per id, -1 - its index: truncation and the special tokens
/// move the marks as they would move the ids.
struct MarkedSides {
  std::vector<int64_t> ids;
  std::vector<std::pair<int64_t, int64_t>> offsets;
  std::vector<int64_t> words;  ///< each id's word in its own side
  std::vector<int64_t> a_marks, b_marks;
};

MarkedSides marked_sides(const detail::TokenizerPipeline& pipeline,
                         const std::string& text,
                         const std::optional<std::string>& pair) {
  MarkedSides out;
  for (const std::string* side : {&text, pair ? &*pair : nullptr}) {
    if (side == nullptr) break;
    detail::Spans bytes;
    std::vector<int64_t> words;
    const std::vector<int64_t> side_ids = pipeline.encode_plain(*side, &bytes, &words);
    const auto side_offsets = detail::character_offsets(*side, bytes);
    for (size_t i = 0; i < side_ids.size(); ++i) {
      (side == &text ? out.a_marks : out.b_marks)
          .push_back(-1 - static_cast<int64_t>(out.ids.size()));
      out.ids.push_back(side_ids[i]);
      out.offsets.push_back(side_offsets[i]);
      out.words.push_back(words[i]);
    }
  }
  return out;
}

/// What a row's token types depend on besides its ids.
struct RowKind {
  bool pair = false;
  bool add_special_tokens = true;
  bool later_window[2] = {false, false};  ///< each side's window is not its first
};

/// A row of marks and special tokens' ids (>= 0) as an `EncodedText`.
EncodedText encoded_row(const detail::TokenizerPipeline& pipeline,
                        const MarkedSides& sides,
                        const std::vector<int64_t>& row,
                        const RowKind& kind) {
  EncodedText out;
  size_t kept[2] = {0, 0};  // each side's ids in the row so far
  for (const int64_t mark : row) {
    if (mark >= 0) {  // a special token's id
      out.input_ids.push_back(mark);
      out.offset_mapping.emplace_back(0, 0);
      out.special_tokens_mask.push_back(1);
      out.sequence_ids.push_back(-1);
      out.word_ids.push_back(-1);
      continue;
    }
    const auto index = static_cast<size_t>(-1 - mark);
    const int side = index < sides.a_marks.size() ? 0 : 1;
    out.input_ids.push_back(sides.ids[index]);
    out.offset_mapping.push_back(sides.offsets[index]);
    out.special_tokens_mask.push_back(0);
    out.sequence_ids.push_back(side);
    out.word_ids.push_back(sides.words[index]);
    detail::trim_offsets(pipeline, sides.ids[index], kept[side]++, out.offset_mapping.back());
  }
  const detail::TemplateProcessing& post = pipeline.post_processor;
  out.token_type_ids = post.type_ids(
      kept[0], kind.pair ? std::optional<size_t>(kept[1]) : std::nullopt, kind.add_special_tokens);
  TORCH_INTERNAL_ASSERT(out.token_type_ids.size() == out.input_ids.size(),
                        "a row has as many token types as ids");
  for (size_t t = 0; t < out.input_ids.size() && post.later_windows_keep_encoded_types; ++t) {
    const int64_t side = out.sequence_ids[t];
    if (side >= 0 && kind.later_window[side]) out.token_type_ids[t] = side;
  }
  return out;
}

/// A cut sequence's windows (and a pair's) joined into rows by `join`, in
/// tokenizers' merge_with order: the first windows, then each later
/// first-side window with every second-side one, then the first first-side
/// window with the later second-side ones.
template <typename Row, typename Join>
std::vector<Row> window_rows(const detail::SequenceWindows& w, bool pair, const Join& join) {
  std::vector<Row> rows;
  if (!pair) {
    for (const auto& window : w.a) rows.push_back(join(window, nullptr));
    return rows;
  }
  rows.push_back(join(w.a[0], &w.b[0]));
  for (size_t i = 1; i < w.a.size(); ++i) {
    for (const auto& second : w.b) rows.push_back(join(w.a[i], &second));
  }
  for (size_t j = 1; j < w.b.size(); ++j) rows.push_back(join(w.a[0], &w.b[j]));
  return rows;
}

}  // namespace

std::vector<std::vector<int64_t>> Tokenizer::encode_overflowing(
    const std::string& text,
    const std::optional<std::string>& pair,
    const EncodeOptions& options) const {
  detail::check_utf8(text, "text");
  if (pair) detail::check_utf8(*pair, "pair");
  const std::vector<int64_t> a = pipeline_->encode_plain(text);
  const std::vector<int64_t> b = pair ? pipeline_->encode_plain(*pair) : std::vector<int64_t>{};
  const detail::SequenceWindows w =
      detail::truncation_windows(a, pair ? &b : nullptr, sequence_budget(pair.has_value(), options),
                                 options.truncation(), pipeline_->truncate_left, options.stride());
  return window_rows<std::vector<int64_t>>(
      w, pair.has_value(),
      [&](const std::vector<int64_t>& first, const std::vector<int64_t>* second) {
        return with_specials(first, second, options);
      });
}

std::vector<EncodedText> Tokenizer::encode_overflowing_with_offsets(
    const std::string& text,
    const std::optional<std::string>& pair,
    const EncodeOptions& options) const {
  detail::check_utf8(text, "text");
  if (pair) detail::check_utf8(*pair, "pair");
  const MarkedSides sides = marked_sides(*pipeline_, text, pair);
  const detail::SequenceWindows w = detail::truncation_windows(
      sides.a_marks, pair ? &sides.b_marks : nullptr, sequence_budget(pair.has_value(), options),
      options.truncation(), pipeline_->truncate_left, options.stride());
  return window_rows<EncodedText>(
      w, pair.has_value(),
      [&](const std::vector<int64_t>& first, const std::vector<int64_t>* second) {
        const RowKind kind{pair.has_value(),
                           options.add_special_tokens(),
                           {&first != &w.a.front(), second != nullptr && second != &w.b.front()}};
        return encoded_row(*pipeline_, sides, with_specials(first, second, options), kind);
      });
}

EncodedText Tokenizer::encode_with_offsets(const std::string& text,
                                           const std::optional<std::string>& pair,
                                           const EncodeOptions& options) const {
  detail::check_utf8(text, "text");
  if (pair) detail::check_utf8(*pair, "pair");
  const MarkedSides sides = marked_sides(*pipeline_, text, pair);
  std::vector<int64_t> b_marks = sides.b_marks;  // cut in place
  return encoded_row(*pipeline_, sides,
                     truncated_with_specials(sides.a_marks, pair ? &b_marks : nullptr, options),
                     RowKind{pair.has_value(), options.add_special_tokens(), {false, false}});
}

std::vector<int64_t> Tokenizer::encode(const std::string& text,
                                       const EncodeOptions& options) const {
  detail::check_utf8(text, "text");
  return truncated_with_specials(pipeline_->encode_plain(text), nullptr, options);
}

std::vector<int64_t> Tokenizer::encode_pair(const std::string& text,
                                            const std::string& pair,
                                            const EncodeOptions& options) const {
  detail::check_utf8(text, "text");
  detail::check_utf8(pair, "pair");
  std::vector<int64_t> b = pipeline_->encode_plain(pair);
  return truncated_with_specials(pipeline_->encode_plain(text), &b, options);
}

std::vector<std::vector<int64_t>> Tokenizer::encode_each(const std::vector<std::string>& texts,
                                                         const EncodeOptions& options) const {
  for (size_t i = 0; i < texts.size(); ++i) {
    detail::check_utf8(texts[i], ("texts[" + std::to_string(i) + "]").c_str());
  }
  std::vector<std::vector<int64_t>> ids(texts.size());
  // Many small chunks: lines differ in length, so threads finish together.
  detail::parallel_items(
      static_cast<int64_t>(texts.size()),
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          ids[i] = truncated_with_specials(pipeline_->encode_plain(texts[i]), nullptr, options);
        }
      },
      /*chunks_per_thread=*/16);
  return ids;
}

TokenizedBatch Tokenizer::encode_batch(const std::vector<std::string>& texts,
                                       const EncodeOptions& options) const {
  std::vector<std::vector<int64_t>> ids;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> offsets;
  if (options.return_offsets_mapping()) {
    for (size_t i = 0; i < texts.size(); ++i) {
      detail::check_utf8(texts[i], ("texts[" + std::to_string(i) + "]").c_str());
    }
    ids.resize(texts.size());
    offsets.resize(texts.size());
    detail::parallel_items(
        static_cast<int64_t>(texts.size()),
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            EncodedText e = encode_with_offsets(texts[i], std::nullopt, options);
            ids[i] = std::move(e.input_ids);
            offsets[i] = std::move(e.offset_mapping);
          }
        },
        /*chunks_per_thread=*/16);
  } else {
    ids = encode_each(texts, options);
  }
  size_t longest = 0;
  for (const auto& row : ids) longest = std::max(longest, row.size());
  if (options.pad_to_max_length()) {
    longest = std::max(longest, static_cast<size_t>(std::max<int64_t>(options.max_length(), 0)));
  }
  const bool ragged =
      std::any_of(ids.begin(), ids.end(), [&](const auto& row) { return row.size() != longest; });
  TORCH_CHECK_VALUE(!ragged || pipeline_->pad_id.has_value(),
                    "Asking to pad but the tokenizer does not have a padding token. Please select "
                    "a token to use as `pad_token` in tokenizer_config.json (transformers: "
                    "`tokenizer.pad_token = tokenizer.eos_token`)");
  TokenizedBatch batch = padded_batch(ids, static_cast<int64_t>(longest), *pipeline_);
  if (options.return_offsets_mapping()) {
    batch.offset_mapping =
        padded_offsets(offsets, static_cast<int64_t>(longest), pipeline_->pad_left);
  }
  return batch;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  return pipeline_->decode(ids, skip_special_tokens);
}

std::vector<std::string> Tokenizer::batch_decode(const torch::Tensor& sequences,
                                                 bool skip_special_tokens) const {
  TORCH_CHECK_VALUE(sequences.dim() == 2 && !sequences.is_floating_point(),
                    "batch_decode: expected sequences of integer ids of shape (N, L), but got ",
                    sequences.scalar_type(), " of shape ", sequences.sizes());
  const torch::Tensor rows = sequences.to(torch::kCPU, torch::kLong).contiguous();
  std::vector<std::vector<int64_t>> ids;
  for (int64_t i = 0; i < rows.size(0); ++i) {
    const int64_t* row = rows[i].data_ptr<int64_t>();
    ids.emplace_back(row, row + rows.size(1));
  }
  return batch_decode(ids, skip_special_tokens);
}

std::vector<std::string> Tokenizer::batch_decode(const std::vector<std::vector<int64_t>>& sequences,
                                                 bool skip_special_tokens) const {
  std::vector<std::string> texts(sequences.size());
  detail::parallel_items(
      static_cast<int64_t>(sequences.size()),
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) texts[i] = decode(sequences[i], skip_special_tokens);
      },
      /*chunks_per_thread=*/16);
  return texts;
}

std::optional<int64_t> Tokenizer::token_to_id(const std::string& token) const {
  if (const auto added = pipeline_->added.id_of(token)) return added;
  return pipeline_->model->token_to_id(token);
}

std::optional<int64_t> Tokenizer::pad_token_id() const { return pipeline_->pad_id; }

std::optional<int64_t> Tokenizer::unk_token_id() const { return pipeline_->unk_id; }

std::optional<int64_t> Tokenizer::cls_token_id() const { return pipeline_->cls_id; }

std::optional<int64_t> Tokenizer::model_max_length() const { return pipeline_->model_max_length; }

std::optional<std::string> Tokenizer::id_to_token(int64_t id) const {
  const std::string* token = pipeline_->token_of(id);
  return token != nullptr ? std::optional<std::string>(*token) : std::nullopt;
}

std::string Tokenizer::convert_tokens_to_string(const std::vector<std::string>& tokens) const {
  return pipeline_->decoder->decode(tokens);
}

const std::string& Tokenizer::continuing_subword_prefix() const {
  return pipeline_->model->continuing_subword_prefix();
}

int64_t Tokenizer::size() const { return pipeline_->size(); }

const std::string& Tokenizer::tokenizer_class() const { return pipeline_->tokenizer_class; }

}  // namespace mha
