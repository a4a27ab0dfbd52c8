// mha::ContinuousBatch: a stack's requests over its paged caches (serving/serving_stack.h).

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "linear/packed_linear.h"
#include "mha/batching.h"
#include "mha/quantization.h"
#include "serving/causal_serving_stack.h"
#include "serving/decoder_serving_stack.h"
#include "serving/source_encoding.h"

namespace mha {

using torch::Tensor;

namespace {

/// The row block of `options`' batch invariance (checked), 0 without it.
int64_t invariant_rows(const ContinuousBatchOptions& options) {
  if (!options.batch_invariant()) return 0;
  TORCH_CHECK_VALUE(options.invariant_rows() > 0,
                    "ContinuousBatchOptions: expected invariant_rows > 0, but got ",
                    options.invariant_rows());
  return options.invariant_rows();
}

/// Throws unless `stack` holds request `id` (`method`: the call, for the message).
void check_known(const detail::ServingStack& stack, int64_t id, const char* method) {
  TORCH_CHECK_INDEX(stack.table().contains(id), "ContinuousBatch::", method,
                    ": unknown request id ", id, "; add() gives the ids");
}

/// The checks both constructors make of the stack.
void check_stack(const torch::nn::Module& stack, size_t layers, bool batch_invariant) {
  TORCH_CHECK_VALUE(layers > 0, "ContinuousBatch: expected a stack with layers");
  TORCH_CHECK(!stack.is_training(),
              "ContinuousBatch is for inference, but the stack is in training mode; call "
              "eval() on it");
  TORCH_CHECK_VALUE(!(batch_invariant && is_quantized(stack)),
                    "ContinuousBatch: batch_invariant needs float weights; int8 activations "
                    "(mha::quantize_dynamic) are quantized per call, over all of a step's rows");
}

/// `stack`'s layers and final norm on `rows` (T, E), the new rows of `ids`:
/// a step of the batch's stack alone (its caller embeds and projects).
detail::BatchStep stack_step(detail::ServingStack& stack,
                             const Tensor& rows,
                             const std::vector<int64_t>& ids) {
  return [&stack, rows, &ids](PagedStackCache&, PagedStackCache*, const Tensor& cu_seqlens) {
    // The stack step checks every layer's call once and counts the blocks once.
    return stack.step(rows, ids, cu_seqlens,  // (T, E)
                      "ContinuousBatch::step: remove() finished requests, step fewer of them, "
                      "or give the batch more blocks (ContinuousBatchOptions::num_blocks)");
  };
}

/// `model`'s decoder, checked to be a `TransformerDecoder`.
TransformerDecoder decoder_of(const Transformer& model) {
  TORCH_CHECK_VALUE(!model.is_empty(), "ContinuousBatch: expected a Transformer, not nullptr");
  const std::shared_ptr<torch::nn::Module> decoder = model->decoder.ptr();
  auto built = std::dynamic_pointer_cast<TransformerDecoderImpl>(decoder);
  TORCH_CHECK_TYPE(built != nullptr,
                   "ContinuousBatch: expected the Transformer's decoder to be a "
                   "mha::TransformerDecoder, but it is ",
                   decoder->name(), " (a custom_decoder of another type)");
  return TransformerDecoder(std::move(built));
}

}  // namespace

ContinuousBatch::ContinuousBatch(const Transformer& model, const ContinuousBatchOptions& options)
    : ContinuousBatch(decoder_of(model), options) {
  model_ = model;
}

ContinuousBatch::ContinuousBatch(TransformerEncoder causal_stack,
                                 const ContinuousBatchOptions& options)
    : invariant_rows_(invariant_rows(options)) {
  TORCH_CHECK_VALUE(!causal_stack.is_empty(), "ContinuousBatch: expected a stack, not nullptr");
  check_stack(*causal_stack, causal_stack->layers->size(), invariant_rows_ > 0);
  stack_ = std::make_unique<detail::CausalServingStack>(std::move(causal_stack), options);
}

ContinuousBatch::ContinuousBatch(TransformerDecoder decoder, const ContinuousBatchOptions& options)
    : invariant_rows_(invariant_rows(options)) {
  TORCH_CHECK_VALUE(!decoder.is_empty(), "ContinuousBatch: expected a decoder, not nullptr");
  check_stack(*decoder, decoder->layers->size(), invariant_rows_ > 0);
  stack_ = std::make_unique<detail::DecoderServingStack>(std::move(decoder), options);
}

ContinuousBatch::~ContinuousBatch() = default;

int64_t ContinuousBatch::add(const Tensor& memory, const Tensor& memory_key_padding_mask) {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::optional<detail::FixedRowBlocks> fixed_rows;  // batch-invariant: as add_sources' rows
  if (invariant_rows_ > 0) fixed_rows.emplace(invariant_rows_);
  return stack_->add(memory, memory_key_padding_mask);
}

std::vector<int64_t> ContinuousBatch::add_sources(
    const std::vector<Tensor>& sources, const std::vector<Tensor>& src_key_padding_masks) {
  TORCH_CHECK(!model_.is_empty(),
              "ContinuousBatch::add_sources: expected a batch made from an mha::Transformer (its "
              "encoder encodes the sources); this one was made from a stack: add() its memories");
  if (sources.empty()) return {};
  torch::NoGradGuard no_grad;
  // Outside the lock, as a caller's own encode: the model and the stack's modules are only read.
  // memories: (S_i, E) each, from one encoder call unless batch-invariant
  const std::vector<Tensor> memories =
      detail::encode_sources(*model_, stack_->input_attention(), sources, src_key_padding_masks,
                             /*one_call_each=*/invariant_rows_ > 0);
  const std::lock_guard<std::mutex> lock(mutex_);
  // The memories' keys and values in one GEMM per layer; batch-invariant: in
  // fixed row blocks, so each row's are add()'s.
  std::optional<detail::FixedRowBlocks> fixed_rows;
  if (invariant_rows_ > 0) fixed_rows.emplace(invariant_rows_);
  return stack_->add_all(memories, src_key_padding_masks);
}

std::map<int64_t, Tensor> ContinuousBatch::step(const std::map<int64_t, Tensor>& inputs) {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int64_t> ids, lengths;
  std::vector<Tensor> rows;
  for (const auto& [id, x] : inputs) {
    check_known(*stack_, id, "step");
    detail::check_serving_rows(x, fmt::format("inputs[{}]", id), stack_->input_attention());
    ids.push_back(id);
    lengths.push_back(x.size(0));
    rows.push_back(x);
  }
  if (ids.empty()) return {};
  const Tensor x = run_step(lengths, stack_step(*stack_, at::cat(rows), ids));  // (T, E)
  std::map<int64_t, Tensor> outputs;
  int64_t begin = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    outputs.emplace(ids[i], x.narrow(0, begin, lengths[i]));  // (L_i, E)
    begin += lengths[i];
  }
  return outputs;
}

Tensor ContinuousBatch::step(const Tensor& rows,
                             const std::vector<int64_t>& ids,
                             const std::vector<int64_t>& lengths) {
  const std::lock_guard<std::mutex> lock(mutex_);
  detail::check_serving_rows(rows, "rows", stack_->input_attention());
  const int64_t total = checked_rows(ids, lengths);
  TORCH_CHECK_VALUE(total == rows.size(0),
                    fmt::format("ContinuousBatch::step: expected rows of {} positions (the sum of "
                                "lengths), but got {}",
                                total, rows.size(0)));
  if (ids.empty()) return rows;
  return run_step(lengths, stack_step(*stack_, rows, ids));  // (T, E)
}

int64_t ContinuousBatch::checked_rows(const std::vector<int64_t>& ids,
                                      const std::vector<int64_t>& lengths) const {
  TORCH_CHECK_VALUE(ids.size() == lengths.size(),
                    fmt::format("ContinuousBatch::step: expected one length per id ({}), but "
                                "got {} lengths",
                                ids.size(), lengths.size()));
  int64_t total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    check_known(*stack_, ids[i], "step");
    TORCH_CHECK_VALUE(lengths[i] >= 0, "ContinuousBatch::step: expected lengths[", i,
                      "] >= 0, but got ", lengths[i]);
    total += lengths[i];
  }
  return total;
}

Tensor ContinuousBatch::run_step(const std::vector<int64_t>& lengths,
                                 const detail::BatchStep& step) {
  TORCH_CHECK(!(invariant_rows_ > 0 && is_quantized(stack_->module())),
              "ContinuousBatch::step: the batch was made with "
              "ContinuousBatchOptions::batch_invariant(true), but its stack has int8 weights now "
              "(mha::quantize_dynamic after the batch was made): int8 activations are quantized "
              "per call, over all of a step's rows; make the batch without batch_invariant");
  torch::NoGradGuard no_grad;
  std::optional<detail::FixedRowBlocks> fixed_rows;
  if (invariant_rows_ > 0) fixed_rows.emplace(invariant_rows_);
  std::vector<int64_t> offsets{0};
  for (const int64_t length : lengths) offsets.push_back(offsets.back() + length);
  return step(stack_->self_cache(), stack_->memory_cache(), torch::tensor(offsets));
}

void ContinuousBatch::remove(int64_t id) {
  const std::lock_guard<std::mutex> lock(mutex_);
  check_known(*stack_, id, "remove");
  stack_->remove(id);
}

int64_t ContinuousBatch::fork(int64_t id) {
  const std::lock_guard<std::mutex> lock(mutex_);
  check_known(*stack_, id, "fork");
  return stack_->fork(id);
}

std::vector<int64_t> ContinuousBatch::ids() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return stack_->table().sequence_ids();
}

int64_t ContinuousBatch::length(int64_t id) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return stack_->table().length(id);
}

int64_t ContinuousBatch::num_free_blocks() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return stack_->table().num_free_blocks();
}

int64_t ContinuousBatch::memory_bytes() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return stack_->memory_bytes();
}

int64_t ContinuousBatch::used_bytes() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return stack_->used_bytes();
}

namespace detail {

Tensor step_model(ContinuousBatch& batch,
                  const std::vector<int64_t>& ids,
                  const std::vector<int64_t>& lengths,
                  const BatchStep& step) {
  const std::lock_guard<std::mutex> lock(batch.mutex_);
  batch.checked_rows(ids, lengths);
  return batch.run_step(lengths, step);
}

}  // namespace detail
}  // namespace mha
