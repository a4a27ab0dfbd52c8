#pragma once

// Private: the model behind a mha::ContinuousBatch and its paged caches, one
// type for both kinds of stack: a TransformerDecoder (self-attention and
// memory caches) or a causal TransformerEncoder stack (self-attention caches
// only). Each kind counts the pools it has, so no caller can count a pool a
// stack lacks. Not thread-safe: ContinuousBatch locks around every call.

#include <mha/batching.h>
#include <mha/paged_kv_cache.h>
#include <mha/paged_stack_cache.h>
#include <mha/transformer_coder.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mha {
namespace detail {

class ServingStack {
 public:
  virtual ~ServingStack() = default;

  /// The stack module (its training mode, whether its weights are int8).
  virtual const torch::nn::Module& module() const = 0;
  /// The first layer's self-attention: the inputs' dtype, device and width.
  virtual const MultiheadAttentionImpl& input_attention() const = 0;
  /// Admits a request (a decoder's: `memory` (S, E) and its padding mask
  /// (S) bool; a decoder-only stack's: neither); its id. Nothing changes on error.
  virtual int64_t add(const torch::Tensor& memory,
                      const torch::Tensor& memory_key_padding_mask) = 0;
  /// Admits one request per memory of `memories` (each as `add`'s, its mask
  /// `masks[i]` or undefined), all or none: every memory and the free blocks
  /// for all checked first. Their ids, in order.
  virtual std::vector<int64_t> add_all(const std::vector<torch::Tensor>& memories,
                                       const std::vector<torch::Tensor>& masks) = 0;
  /// The layers and the final norm on `x` (T, E), the new rows of `ids`
  /// (`cu_seqlens`): (T, E). Checked, the blocks counted once, before any
  /// cache changes; `fix`: what the caller can do about too few blocks.
  virtual torch::Tensor step(const torch::Tensor& x,
                             const std::vector<int64_t>& ids,
                             const torch::Tensor& cu_seqlens,
                             const char* fix) = 0;
  /// Forgets request `id` (known) in every block table.
  virtual void remove(int64_t id) = 0;
  /// A new request sharing request `id`'s (known) blocks in every block
  /// table (copy on write); its id.
  virtual int64_t fork(int64_t id) { return self_.fork(id); }
  /// Bytes of all its pools.
  virtual int64_t memory_bytes() const = 0;
  /// Bytes of the blocks its requests hold.
  virtual int64_t used_bytes() const = 0;

  /// The layers' self-attention caches (one block table for all): the
  /// requests, their lengths, the free blocks.
  const PagedStackCache& table() const { return self_; }

 protected:
  /// `self`: the layers' self-attention caches over one block table.
  explicit ServingStack(PagedStackCache self) : self_(std::move(self)) {}

  PagedStackCache self_;
};

/// `x` (the argument `name`): (rows, E) in `attn`'s dtype and on its device.
void check_serving_rows(const torch::Tensor& x,
                        const std::string& name,
                        const MultiheadAttentionImpl& attn);

/// A decoder's serving stack: pools of `num_blocks` (self-attention) and
/// `num_memory_blocks` (memories) blocks, each kind one table for all layers.
std::unique_ptr<ServingStack> make_decoder_serving_stack(TransformerDecoder decoder,
                                                         const ContinuousBatchOptions& options);
/// A causal encoder stack's serving stack: self-attention pools only.
std::unique_ptr<ServingStack> make_causal_serving_stack(TransformerEncoder stack,
                                                        const ContinuousBatchOptions& options);

}  // namespace detail
}  // namespace mha
