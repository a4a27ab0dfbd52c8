#include "serving/decoder_serving_stack.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "cache/paged_block_manager.h"
#include "cache/paged_stack_step.h"
#include "common/shape_format.h"

namespace mha {
namespace detail {

int64_t DecoderServingStack::add(const torch::Tensor& memory,
                                 const torch::Tensor& memory_key_padding_mask) {
  const torch::Tensor kept = unmasked(memory, memory_key_padding_mask);  // (S', E)
  check_memory(kept);
  const int64_t needed = blocks_for(kept.size(0));
  TORCH_CHECK(needed <= cross_.num_free_blocks(),
              fmt::format("cannot admit the request: its memory of {} positions needs {} blocks "
                          "per layer, and {} are free; remove() finished requests or give the "
                          "batch more memory blocks",
                          kept.size(0), needed, cross_.num_free_blocks()));
  return admit({kept}).front();
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
  return kept.empty() ? std::vector<int64_t>{} : admit(kept);
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

std::vector<int64_t> DecoderServingStack::admit(const std::vector<torch::Tensor>& memories) {
  std::vector<int64_t> ids;
  try {
    for (size_t i = 0; i < memories.size(); ++i) {
      const int64_t id = self_.add_sequence();
      const int64_t same = cross_.add_sequence();
      TORCH_INTERNAL_ASSERT(same == id, "both block tables give a request the same id");
      ids.push_back(id);
    }
    write_memories(ids, memories);
  } catch (...) {
    for (const int64_t id : ids) remove(id);  // all or none: no request left behind
    throw;
  }
  return ids;
}

void DecoderServingStack::write_memories(const std::vector<int64_t>& ids,
                                         const std::vector<torch::Tensor>& memories) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> memory_offsets{0};
  for (const torch::Tensor& memory : memories) {
    memory_offsets.push_back(memory_offsets.back() + memory.size(0));
  }
  // (S, E): every memory's rows, one after another
  const torch::Tensor rows = memories.size() == 1 ? memories.front() : at::cat(memories);
  const torch::Tensor no_queries = rows.new_empty({0, rows.size(1)});  // (0, E)
  const torch::Tensor query_offsets =
      torch::zeros({static_cast<int64_t>(ids.size()) + 1}, torch::kLong);
  const torch::Tensor key_offsets = torch::tensor(memory_offsets);
  const PagedOffsets offsets{std::vector<int64_t>(ids.size() + 1, 0), memory_offsets};
  // The memory table grows once for all layers; each layer writes its pool.
  PagedStackStep step(ids);
  step.check(stack_layers(cross_), offsets,
             "remove() finished requests or give the batch more memory blocks");
  step.open();
  for (int64_t i = 0; i < cross_.num_layers(); ++i) {
    layer(i).multihead_attn->forward_paged(no_queries, rows, rows, cross_.layer(i), ids,
                                           query_offsets, key_offsets);
  }
}

}  // namespace detail
}  // namespace mha
