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
  const torch::nn::Module& module() const { return module_; }
  /// The first layer's self-attention: the inputs' dtype, device and width.
  const MultiheadAttentionImpl& input_attention() const { return input_attention_; }
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
  /// See `table`: for a whole model's paged step.
  PagedStackCache& self_cache() { return self_; }
  /// A decoder's memory caches (another block table), or null.
  virtual PagedStackCache* memory_cache() { return nullptr; }

 protected:
  /// `module`'s (which the subclass holds) self-attention caches, of
  /// `options`' blocks, over one block table; `input_attention`: its first
  /// layer's self-attention.
  template <typename Stack>
  ServingStack(Stack& module,
               const MultiheadAttentionImpl& input_attention,
               const ContinuousBatchOptions& options)
      : self_(module.make_paged_cache(
            PagedKVCacheOptions(options.num_blocks(), options.block_size()))),
        module_(module),
        input_attention_(input_attention) {}

  PagedStackCache self_;

 private:
  const torch::nn::Module& module_;
  const MultiheadAttentionImpl& input_attention_;
};

/// `x` (the argument `name`): (rows, E) in `attn`'s dtype and on its device.
void check_serving_rows(const torch::Tensor& x,
                        const std::string& name,
                        const MultiheadAttentionImpl& attn);

}  // namespace detail
}  // namespace mha
