// The serving stack of a TransformerDecoder: its layers' self-attention
// caches over one block table, their cross-attention (memory) caches over
// another; a request's memory is projected into every layer's memory pool
// when it is admitted.

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "cache/paged_block_manager.h"
#include "cache/paged_stack_step.h"
#include "common/shape_format.h"
#include "serving/serving_stack.h"
#include "transformer/stack_paged.h"

namespace mha {
namespace detail {

namespace {

class DecoderServingStack final : public ServingStack {
 public:
  DecoderServingStack(TransformerDecoder decoder, const ContinuousBatchOptions& options)
      : ServingStack(decoder->make_paged_cache(
            PagedKVCacheOptions(options.num_blocks(), options.block_size()))),
        decoder_(std::move(decoder)),
        cross_(decoder_->make_paged_memory_cache(
            PagedKVCacheOptions(options.num_memory_blocks(), options.block_size()))) {}

  const torch::nn::Module& module() const override { return *decoder_; }
  const MultiheadAttentionImpl& input_attention() const override { return *layer(0).self_attn; }
  int64_t add(const torch::Tensor& memory, const torch::Tensor& memory_key_padding_mask) override;
  std::vector<int64_t> add_all(const std::vector<torch::Tensor>& memories,
                               const std::vector<torch::Tensor>& masks) override;
  torch::Tensor step(const torch::Tensor& x,
                     const std::vector<int64_t>& ids,
                     const torch::Tensor& cu_seqlens,
                     const char* fix) override {
    return decoder_paged_step(*decoder_, x, torch::Tensor(), self_.layers(), cross_.layers(), ids,
                              cu_seqlens, torch::Tensor(), fix);  // (T, E)
  }
  void remove(int64_t id) override {
    self_.release(id);
    cross_.release(id);
  }
  int64_t fork(int64_t id) override {
    const int64_t forked = self_.fork(id);
    // Both tables count ids alike: a request has the same id in each.
    TORCH_CHECK(cross_.fork(id) == forked, "ContinuousBatch::fork: the block tables' ids diverged");
    return forked;
  }
  int64_t memory_bytes() const override { return self_.memory_bytes() + cross_.memory_bytes(); }
  int64_t used_bytes() const override { return self_.used_bytes() + cross_.used_bytes(); }

 private:
  TransformerDecoderLayerImpl& layer(size_t i) const {
    return *decoder_->layers->ptr(i)->as<TransformerDecoderLayerImpl>();
  }
  /// `memory` (S, E) without the positions its mask (S) marks, both checked.
  torch::Tensor unmasked(const torch::Tensor& memory,
                         const torch::Tensor& memory_key_padding_mask) const;
  /// Throws unless `memory` (S, E) has positions and the decoder's width,
  /// dtype and device.
  void check_memory(const torch::Tensor& memory) const;
  /// Memory blocks of `positions` positions.
  int64_t blocks_for(int64_t positions) const {
    return (positions + cross_.block_size() - 1) / cross_.block_size();
  }
  /// Admits `memory` (S, E), its unmasked rows; its id.
  int64_t admit(const torch::Tensor& memory);
  /// Projects `memory` (S, E) into every layer's memory pool for `id`.
  void write_memory(int64_t id, const torch::Tensor& memory);

  TransformerDecoder decoder_;
  PagedStackCache cross_;  // per layer, over one block table
};

int64_t DecoderServingStack::add(const torch::Tensor& memory,
                                 const torch::Tensor& memory_key_padding_mask) {
  return admit(unmasked(memory, memory_key_padding_mask));
}

std::vector<int64_t> DecoderServingStack::add_all(const std::vector<torch::Tensor>& memories,
                                                  const std::vector<torch::Tensor>& masks) {
  std::vector<torch::Tensor> kept;  // (S_i', E): the unmasked positions
  int64_t needed = 0;
  for (size_t i = 0; i < memories.size(); ++i) {
    kept.push_back(unmasked(memories[i], masks.empty() ? torch::Tensor() : masks[i]));
    check_memory(kept.back());
    needed += blocks_for(kept.back().size(0));
  }
  TORCH_CHECK(needed <= cross_.num_free_blocks(),
              fmt::format("cannot admit the {} requests: their memories need {} blocks per layer, "
                          "and {} are free; remove() finished requests or give the batch more "
                          "memory blocks",
                          memories.size(), needed, cross_.num_free_blocks()));
  std::vector<int64_t> ids;
  try {
    for (const torch::Tensor& memory : kept) ids.push_back(admit(memory));
  } catch (...) {
    for (const int64_t id : ids) remove(id);  // all or none
    throw;
  }
  return ids;
}

torch::Tensor DecoderServingStack::unmasked(const torch::Tensor& memory,
                                            const torch::Tensor& memory_key_padding_mask) const {
  TORCH_CHECK(memory.defined() && memory.dim() == 2, "expected memory of shape (S, E), but got ",
              memory.defined() ? torch_size(memory.sizes()) : "an undefined tensor");
  if (!memory_key_padding_mask.defined()) return memory;
  TORCH_CHECK(memory_key_padding_mask.scalar_type() == at::kBool &&
                  memory_key_padding_mask.sizes() == memory.sizes().slice(0, 1),
              fmt::format("expected memory_key_padding_mask of shape torch.Size([{}]) and dtype "
                          "bool, but got {} of {}",
                          memory.size(0), torch_size(memory_key_padding_mask.sizes()),
                          c10::toString(memory_key_padding_mask.scalar_type())));
  // Padding positions are left out: attention over the rest is the masked attention.
  return memory.index_select(0, memory_key_padding_mask.logical_not().nonzero().flatten());
}

void DecoderServingStack::check_memory(const torch::Tensor& memory) const {
  TORCH_CHECK_VALUE(memory.size(0) > 0, "expected a memory of at least one unmasked position");
  check_serving_rows(memory, "memory", *layer(0).multihead_attn);
}

int64_t DecoderServingStack::admit(const torch::Tensor& memory) {
  const int64_t positions = memory.size(0);  // memory: (S, E)
  check_memory(memory);
  const int64_t needed = blocks_for(positions);
  TORCH_CHECK(needed <= cross_.num_free_blocks(),
              fmt::format("cannot admit the request: its memory of {} positions needs {} blocks "
                          "per layer, and {} are free; remove() finished requests or give the "
                          "batch more memory blocks",
                          positions, needed, cross_.num_free_blocks()));
  const int64_t id = self_.add_sequence();
  const int64_t same = cross_.add_sequence();
  TORCH_INTERNAL_ASSERT(same == id, "both block tables give a request the same id");
  try {
    write_memory(id, memory);
  } catch (...) {
    remove(id);  // a failed admission leaves no request behind
    throw;
  }
  return id;
}

void DecoderServingStack::write_memory(int64_t id, const torch::Tensor& memory) {
  torch::NoGradGuard no_grad;
  const int64_t positions = memory.size(0);
  const torch::Tensor no_queries = memory.new_empty({0, memory.size(1)});  // (0, E)
  const torch::Tensor query_offsets = torch::zeros({2}, torch::kLong);
  const torch::Tensor memory_offsets = torch::tensor({int64_t{0}, positions});
  const PagedOffsets offsets{{0, 0}, {0, positions}};
  // The memory table grows once for all layers; each layer writes its pool.
  PagedStackStep step({id});
  step.check(cross_.layers(), offsets,
             "remove() finished requests or give the batch more memory blocks");
  step.open();
  for (size_t i = 0; i < cross_.size(); ++i) {
    layer(i).multihead_attn->forward_paged(no_queries, memory, memory, cross_[i], {id},
                                           query_offsets, memory_offsets);
  }
}

}  // namespace

std::unique_ptr<ServingStack> make_decoder_serving_stack(TransformerDecoder decoder,
                                                         const ContinuousBatchOptions& options) {
  return std::make_unique<DecoderServingStack>(std::move(decoder), options);
}

}  // namespace detail
}  // namespace mha
