// mha::ContinuousBatch: a decoder's requests over per-layer paged caches.

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <optional>

#include "attention/projector.h"
#include "cache/paged_kv_cache_state.h"
#include "common/shape_format.h"
#include "linear/packed_linear.h"
#include "mha/batching.h"
#include "mha/quantization.h"

namespace mha {

using torch::Tensor;

namespace {

/// `x` (the argument `name`): (rows, E) in the decoder's dtype and on its device.
void check_rows(const Tensor& x, const std::string& name, const MultiheadAttentionImpl& attn) {
  const Tensor& param = detail::Projector::first_weight(attn);
  const int64_t embed_dim = attn.options.embed_dim();
  TORCH_CHECK_VALUE(
      x.defined() && x.dim() == 2 && x.size(1) == embed_dim,
      fmt::format("expected {} of shape (rows, {}), but got {}", name, embed_dim,
                  x.defined() ? detail::torch_size(x.sizes()) : "an undefined tensor"));
  TORCH_CHECK_TYPE(x.scalar_type() == param.scalar_type() && x.device() == param.device(),
                   fmt::format("expected {} of dtype {} on {} (the decoder's), but got {} on {}",
                               name, c10::toString(param.scalar_type()), param.device().str(),
                               c10::toString(x.scalar_type()), x.device().str()));
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

}  // namespace

ContinuousBatch::ContinuousBatch(TransformerEncoder causal_stack,
                                 const ContinuousBatchOptions& options)
    : causal_stack_(std::move(causal_stack)),
      block_size_(options.block_size()),
      batch_invariant_(options.batch_invariant()) {
  TORCH_CHECK_VALUE(!causal_stack_.is_empty(), "ContinuousBatch: expected a stack, not nullptr");
  check_stack(*causal_stack_, causal_stack_->layers->size(), batch_invariant_);
  for (const auto& module : *causal_stack_->layers) {
    self_.emplace_back(*module->as<TransformerEncoderLayerImpl>()->self_attn,
                       PagedKVCacheOptions(options.num_blocks(), options.block_size()));
  }
}

ContinuousBatch::ContinuousBatch(TransformerDecoder decoder, const ContinuousBatchOptions& options)
    : decoder_(std::move(decoder)),
      block_size_(options.block_size()),
      batch_invariant_(options.batch_invariant()) {
  TORCH_CHECK_VALUE(!decoder_.is_empty(), "ContinuousBatch: expected a decoder, not nullptr");
  check_stack(*decoder_, decoder_->layers->size(), batch_invariant_);
  for (size_t i = 0; i < decoder_->layers->size(); ++i) {
    self_.emplace_back(*layer(i).self_attn,
                       PagedKVCacheOptions(options.num_blocks(), options.block_size()));
    cross_.emplace_back(
        *layer(i).multihead_attn,
        PagedKVCacheOptions(options.num_memory_blocks(), options.block_size()).static_kv(true));
  }
}

TransformerDecoderLayerImpl& ContinuousBatch::layer(size_t i) {
  return *decoder_->layers[i]->as<TransformerDecoderLayerImpl>();
}

const MultiheadAttentionImpl& ContinuousBatch::first_self_attention() {
  return decoder_.is_empty()
             ? *causal_stack_->layers[0]->as<TransformerEncoderLayerImpl>()->self_attn
             : *layer(0).self_attn;
}

int64_t ContinuousBatch::add(const Tensor& memory, const Tensor& memory_key_padding_mask) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (decoder_.is_empty()) {
    TORCH_CHECK_VALUE(!memory.defined() && !memory_key_padding_mask.defined(),
                      "expected no memory: a decoder-only stack's requests have none");
    return add_to_pools();
  }
  TORCH_CHECK(memory.defined() && memory.dim() == 2, "expected memory of shape (S, E), but got ",
              memory.defined() ? detail::torch_size(memory.sizes()) : "an undefined tensor");
  if (!memory_key_padding_mask.defined()) return add_locked(memory);
  TORCH_CHECK(memory_key_padding_mask.scalar_type() == at::kBool &&
                  memory_key_padding_mask.sizes() == memory.sizes().slice(0, 1),
              fmt::format("expected memory_key_padding_mask of shape torch.Size([{}]) and dtype "
                          "bool, but got {} of {}",
                          memory.size(0), detail::torch_size(memory_key_padding_mask.sizes()),
                          c10::toString(memory_key_padding_mask.scalar_type())));
  // Padding positions are left out: attention over the rest is the masked attention.
  return add_locked(
      memory.index_select(0, memory_key_padding_mask.logical_not().nonzero().flatten()));
}

int64_t ContinuousBatch::add_locked(const Tensor& memory) {
  const int64_t positions = memory.size(0);
  TORCH_CHECK_VALUE(positions > 0, "expected a memory of at least one unmasked position");
  check_rows(memory, "memory", *layer(0).multihead_attn);
  const int64_t needed = (positions + block_size_ - 1) / block_size_;
  TORCH_CHECK(needed <= cross_[0].num_free_blocks(),
              fmt::format("cannot admit the request: its memory of {} positions needs {} blocks "
                          "per layer, and {} are free; remove() finished requests or give the "
                          "batch more memory blocks",
                          positions, needed, cross_[0].num_free_blocks()));
  // Every layer's pools hold the same requests and lengths: checked once, on layer 0's.
  torch::NoGradGuard no_grad;
  const Tensor no_queries = memory.new_empty({0, memory.size(1)});
  const Tensor query_offsets = torch::zeros({2}, torch::kLong);
  const Tensor memory_offsets = torch::tensor({int64_t{0}, positions});
  const int64_t id = add_to_pools();
  for (size_t i = 0; i < self_.size(); ++i) {
    layer(i).multihead_attn->forward_paged(no_queries, memory, memory, cross_[i], {id},
                                           query_offsets, memory_offsets);
  }
  return id;
}

int64_t ContinuousBatch::add_to_pools() {
  const int64_t id = self_[0].add_sequence();
  for (auto* pools : {&self_, &cross_}) {
    for (auto& cache : *pools) {
      if (&cache == &self_[0]) continue;
      const int64_t same = cache.add_sequence();
      TORCH_INTERNAL_ASSERT(same == id, "every pool gives a request the same id");
    }
  }
  return id;
}

std::map<int64_t, Tensor> ContinuousBatch::step(const std::map<int64_t, Tensor>& inputs) {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int64_t> ids, lengths;
  std::vector<Tensor> rows;
  std::vector<int64_t> offsets{0};
  for (const auto& [id, x] : inputs) {
    TORCH_CHECK_INDEX(self_[0].contains(id), "ContinuousBatch::step: unknown request id ", id,
                      "; add() gives the ids");
    check_rows(x, fmt::format("inputs[{}]", id), first_self_attention());
    ids.push_back(id);
    lengths.push_back(x.size(0));
    rows.push_back(x);
    offsets.push_back(offsets.back() + x.size(0));
  }
  if (ids.empty()) return {};
  const torch::nn::Module& stack =
      decoder_.is_empty() ? static_cast<const torch::nn::Module&>(*causal_stack_) : *decoder_;
  TORCH_CHECK(!(batch_invariant_ && is_quantized(stack)),
              "ContinuousBatch::step: the batch was made with "
              "ContinuousBatchOptions::batch_invariant(true), but its stack has int8 weights now "
              "(mha::quantize_dynamic after the batch was made): int8 activations are quantized "
              "per call, over all of a step's rows; make the batch without batch_invariant");
  // The blocks of every layer's step: checked once, on layer 0's pool.
  detail::paged_kv_cache_state(self_[0]).check_room(
      ids, lengths,
      "ContinuousBatch::step: remove() finished requests, step fewer of them, or give the batch "
      "more blocks (ContinuousBatchOptions::num_blocks)");
  torch::NoGradGuard no_grad;
  std::optional<detail::FixedRowBlocks> fixed_rows;
  if (batch_invariant_) fixed_rows.emplace(kInvariantRows);
  const Tensor cu_seqlens = torch::tensor(offsets);
  Tensor x = at::cat(rows);  // (T, E)
  if (decoder_.is_empty()) {
    x = causal_stack_->forward_paged(x, self_, ids, cu_seqlens);  // its layers, its norm
  } else {
    for (size_t i = 0; i < self_.size(); ++i) {
      x = layer(i).forward_paged(x, Tensor(), self_[i], cross_[i], ids, cu_seqlens);
    }
    if (!decoder_->norm.is_empty()) x = decoder_->norm.forward(x);
  }
  std::map<int64_t, Tensor> outputs;
  for (size_t i = 0; i < ids.size(); ++i) {
    outputs.emplace(ids[i], x.narrow(0, offsets[i], lengths[i]));  // (L_i, E)
  }
  return outputs;
}

void ContinuousBatch::remove(int64_t id) {
  const std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK_INDEX(self_[0].contains(id), "ContinuousBatch::remove: unknown request id ", id);
  for (auto& cache : self_) cache.release(id);
  for (auto& cache : cross_) cache.release(id);
}

std::vector<int64_t> ContinuousBatch::ids() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return self_[0].sequence_ids();
}

int64_t ContinuousBatch::length(int64_t id) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return self_[0].length(id);
}

int64_t ContinuousBatch::num_free_blocks() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return self_[0].num_free_blocks();
}

int64_t ContinuousBatch::memory_bytes() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  int64_t bytes = 0;
  for (const auto* pools : {&self_, &cross_}) {  // a decoder-only stack has no cross_ pools
    for (const auto& cache : *pools) bytes += cache.memory_bytes();
  }
  return bytes;
}

int64_t ContinuousBatch::used_bytes() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  int64_t bytes = 0;
  for (const auto* pools : {&self_, &cross_}) {
    for (const auto& cache : *pools) bytes += cache.used_bytes();
  }
  return bytes;
}

}  // namespace mha
