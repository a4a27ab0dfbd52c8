#pragma once

// Private: what the text pipelines share: texts encoded as transformers'
// pipelines encode them (truncated to the tokenizer's model_max_length), run
// through a task model in padded batches.

#include <mha/hf_task_models.h>
#include <mha/tokenizer.h>
#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mha {
namespace detail {

/// Each of `texts` (with its `pairs`[i] where given) with its offsets,
/// special tokens mask and token types; with `truncation`, cut to the
/// tokenizer's `model_max_length` where it has one (longest first).
std::vector<EncodedText> encode_for_model(const Tokenizer& tokenizer,
                                          const std::vector<std::string>& texts,
                                          bool truncation,
                                          const std::vector<std::string>* pairs = nullptr);

/// `c10::Error` from `pipeline` unless there is one `second` per `first`
/// ("expected a context per question, but got 2 questions and 1 contexts").
void check_one_each(
    const char* pipeline, const char* first, size_t firsts, const char* second, size_t seconds);

/// Rows [begin, end) of a batch padded on the right with `pad_id`.
struct PaddedBatch {
  torch::Tensor input_ids;       ///< (B, L) int64
  torch::Tensor attention_mask;  ///< (B, L) int64, 0 at the padding
  torch::Tensor token_type_ids;  ///< (B, L) int64, 0 at the padding
};

/// `rows` [begin, end) padded on the right with `pad_id`.
PaddedBatch padded_batch(const std::vector<EncodedText>& rows,
                         size_t begin,
                         size_t end,
                         int64_t pad_id);

/// `model` on `rows` [begin, end) padded on the right with `pad_id` (masked),
/// with their token types where the model has token type embeddings (as
/// transformers' tokenizers return them to BERT and ELECTRA, not to DistilBERT):
/// its output for the batch, (B, labels) or (B, L, labels) logits.
TaskModelOutput run_padded(TextTaskModel model,
                           const std::vector<EncodedText>& rows,
                           size_t begin,
                           size_t end,
                           int64_t pad_id);

/// Calls `each(begin, end)` on consecutive ranges of `batch_size` of [0, count)
/// (`c10::Error` unless `batch_size` is positive).
void for_each_batch(size_t count,
                    int64_t batch_size,
                    const std::function<void(size_t, size_t)>& each);

/// Softmax over `logits`' last dimension in float32, as transformers'
/// pipelines compute it (numpy: exp of the shifted logits over their sum).
torch::Tensor pipeline_softmax(const torch::Tensor& logits);

/// Where each code point of `text` starts, and its end: (characters + 1) byte offsets.
std::vector<size_t> char_starts(const std::string& text);

/// `text`'s code points [start, end) (Python's `text[start:end]`), given its `char_starts`.
std::string characters(const std::string& text,
                       const std::vector<size_t>& starts,
                       int64_t start,
                       int64_t end);

}  // namespace detail
}  // namespace mha
