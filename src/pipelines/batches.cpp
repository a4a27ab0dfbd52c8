// The text pipelines' shared steps (transformers 5.23, pipelines/base.py's
// padding and the tokenizer call of each task's preprocess).

#include "pipelines/batches.h"

#include <c10/util/Exception.h>
#include <mha/hf_models.h>
#include <mha/pipelines.h>
#include <torch/types.h>

#include <algorithm>

#include "text/utf8.h"

namespace mha {
namespace detail {

std::vector<EncodedText> encode_for_model(const Tokenizer& tokenizer,
                                          const std::vector<std::string>& texts,
                                          bool truncation,
                                          const std::vector<std::string>* pairs) {
  EncodeOptions options;
  if (const auto limit = tokenizer.model_max_length(); limit && truncation) {
    options.truncation(Truncation::kLongestFirst).max_length(*limit);
  }
  std::vector<EncodedText> out;
  out.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto pair = pairs ? std::optional<std::string>((*pairs)[i]) : std::nullopt;
    out.push_back(tokenizer.encode_with_offsets(texts[i], pair, options));
  }
  return out;
}

void check_one_each(
    const char* pipeline, const char* first, size_t firsts, const char* second, size_t seconds) {
  TORCH_CHECK_VALUE(firsts == seconds, pipeline, ": expected a ", second, " per ", first,
                    ", but got ", firsts, " ", first, "s and ", seconds, " ", second, "s");
}

PaddedBatch padded_batch(const std::vector<EncodedText>& rows,
                         size_t begin,
                         size_t end,
                         int64_t pad_id) {
  size_t longest = 0;
  for (size_t i = begin; i < end; ++i) longest = std::max(longest, rows[i].input_ids.size());
  const auto batch = static_cast<int64_t>(end - begin);
  const auto length = static_cast<int64_t>(longest);
  PaddedBatch out{torch::full({batch, length}, pad_id, torch::kLong),  // (B, L)
                  torch::zeros({batch, length}, torch::kLong),         // (B, L)
                  torch::zeros({batch, length}, torch::kLong)};        // (B, L)
  for (size_t i = begin; i < end; ++i) {
    const auto& row = rows[i].input_ids;
    const auto n = static_cast<int64_t>(row.size());
    const auto r = static_cast<int64_t>(i - begin);
    out.input_ids[r].narrow(0, 0, n).copy_(torch::tensor(row, torch::kLong));
    out.attention_mask[r].narrow(0, 0, n).fill_(1);
    if (!rows[i].token_type_ids.empty()) {
      out.token_type_ids[r].narrow(0, 0, n).copy_(
          torch::tensor(rows[i].token_type_ids, torch::kLong));
    }
  }
  return out;
}

TaskModelOutput run_padded(TextTaskModel model,
                           const std::vector<EncodedText>& rows,
                           size_t begin,
                           size_t end,
                           int64_t pad_id) {
  const PaddedBatch batch = padded_batch(rows, begin, end, pad_id);
  const bool typed = model->options.encoder().type_vocab_size() > 0;
  torch::NoGradGuard no_grad;
  return model(batch.input_ids, batch.attention_mask,
               typed ? batch.token_type_ids : torch::Tensor());
}

void for_each_batch(size_t count,
                    int64_t batch_size,
                    const std::function<void(size_t, size_t)>& each) {
  TORCH_CHECK_VALUE(batch_size > 0, "batch_size: expected a positive number, but got ", batch_size);
  for (size_t begin = 0; begin < count; begin += static_cast<size_t>(batch_size)) {
    each(begin, std::min(count, begin + static_cast<size_t>(batch_size)));
  }
}

torch::Tensor pipeline_softmax(const torch::Tensor& logits) {
  const torch::Tensor x = logits.to(torch::kFloat32);
  const torch::Tensor shifted = (x - std::get<0>(x.max(-1, /*keepdim=*/true))).exp();
  return shifted / shifted.sum(-1, /*keepdim=*/true);
}

std::vector<size_t> char_starts(const std::string& text) {
  std::vector<size_t> starts;
  for (size_t at = 0; at < text.size();) {
    size_t length = 0;
    code_point_at(text, at, length);
    starts.push_back(at);
    at += length;
  }
  starts.push_back(text.size());
  return starts;
}

std::string characters(const std::string& text,
                       const std::vector<size_t>& starts,
                       int64_t start,
                       int64_t end) {
  const size_t from = starts.at(static_cast<size_t>(start));
  return text.substr(from, starts.at(static_cast<size_t>(end)) - from);
}

namespace {

/// The pipeline class that serves `task` (for its errors).
const char* pipeline_of(HfTask task) {
  if (task == HfTask::kTokenClassification) return "TokenClassificationPipeline";
  if (task == HfTask::kQuestionAnswering) return "QuestionAnsweringPipeline";
  return "TextClassificationPipeline";
}

}  // namespace

TextTaskPipeline::TextTaskPipeline(const std::string& directory, HfTask task)
    : TextTaskPipeline(
          load_hf_model(directory).as<TextTaskModel>(), load_hf_tokenizer(directory), task) {}

TextTaskPipeline::TextTaskPipeline(TextTaskModel model, Tokenizer tokenizer, HfTask task)
    : model_(std::move(model)), tokenizer_(std::move(tokenizer)) {
  TORCH_CHECK_VALUE(model_->options.task() == task, pipeline_of(task), ": expected a model ",
                    hf_task_name(task), ", but got one ", hf_task_name(model_->options.task()));
}

}  // namespace detail
}  // namespace mha
