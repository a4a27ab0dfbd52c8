#pragma once

// Private: the serving stack of a causal (decoder-only) TransformerEncoder
// stack: its layers' self-attention caches over one block table, and nothing
// else.

#include <c10/util/Exception.h>

#include "serving/serving_stack.h"
#include "transformer/stack_paged.h"

namespace mha {
namespace detail {

/// `ContinuousBatch`'s stack for a causal `TransformerEncoder`.
class CausalServingStack final : public ServingStack {
 public:
  CausalServingStack(TransformerEncoder stack, const ContinuousBatchOptions& options)
      : ServingStack(
            *stack, *stack->layers->ptr(0)->as<TransformerEncoderLayerImpl>()->self_attn, options),
        stack_(std::move(stack)) {}

  int64_t add(const torch::Tensor& memory, const torch::Tensor& memory_key_padding_mask) override {
    TORCH_CHECK_VALUE(!memory.defined() && !memory_key_padding_mask.defined(),
                      "expected no memory: a decoder-only stack's requests have none");
    return self_.add_sequence();  // in every layer's cache: one table
  }
  std::vector<int64_t> add_all(const std::vector<torch::Tensor>& memories,
                               const std::vector<torch::Tensor>& /*masks*/) override {
    TORCH_CHECK_VALUE(memories.empty(),
                      "expected no memory: a decoder-only stack's requests have none");
    return {};
  }
  torch::Tensor step(const torch::Tensor& x,
                     const std::vector<int64_t>& ids,
                     const torch::Tensor& cu_seqlens,
                     const char* fix) override {
    // its layers, its norm: (T, E)
    return encoder_paged_step(*stack_, x, stack_layers(self_), ids, cu_seqlens, fix);
  }
  void remove(int64_t id) override { self_.release(id); }
  int64_t memory_bytes() const override { return self_.memory_bytes(); }
  int64_t used_bytes() const override { return self_.used_bytes(); }

 private:
  TransformerEncoder stack_;
};

}  // namespace detail
}  // namespace mha
