#pragma once

// Private: the serving stack of a TransformerDecoder: its layers'
// self-attention caches over one block table, their cross-attention (memory)
// caches over another; a request's memory is projected into every layer's
// memory pool when it is admitted.

#include "serving/serving_stack.h"
#include "transformer/stack_paged.h"

namespace mha {
namespace detail {

/// `ContinuousBatch`'s stack for a `TransformerDecoder`.
class DecoderServingStack final : public ServingStack {
 public:
  DecoderServingStack(TransformerDecoder decoder, const ContinuousBatchOptions& options)
      : ServingStack(*decoder,
                     *decoder->layers->ptr(0)->as<TransformerDecoderLayerImpl>()->self_attn,
                     options),
        decoder_(std::move(decoder)),
        cross_(decoder_->make_paged_memory_cache(
            PagedKVCacheOptions(options.num_memory_blocks(), options.block_size()))) {}

  int64_t add(const torch::Tensor& memory, const torch::Tensor& memory_key_padding_mask) override;
  std::vector<int64_t> add_all(const std::vector<torch::Tensor>& memories,
                               const std::vector<torch::Tensor>& masks) override;
  torch::Tensor step(const torch::Tensor& x,
                     const std::vector<int64_t>& ids,
                     const torch::Tensor& cu_seqlens,
                     const char* fix) override {
    return decoder_paged_step(*decoder_, x, torch::Tensor(), stack_layers(self_),
                              stack_layers(cross_), ids, cu_seqlens, torch::Tensor(),
                              fix);  // (T, E)
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
  PagedStackCache* memory_cache() override { return &cross_; }
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
  /// Admits one request per memory of `memories` (checked, unmasked rows),
  /// all or none; their ids.
  std::vector<int64_t> admit(const std::vector<torch::Tensor>& memories);
  /// Projects `memories` (S_i, E each, their unmasked rows) into every
  /// layer's memory pool for `ids`, one call per layer over all their rows.
  void write_memories(const std::vector<int64_t>& ids, const std::vector<torch::Tensor>& memories);

  TransformerDecoder decoder_;
  PagedStackCache cross_;  // per layer, over one block table
};

}  // namespace detail
}  // namespace mha
