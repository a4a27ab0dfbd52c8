#pragma once

// Private: self-attention of sequences packed as rows, each over its own rows
// only (no mask, no cache): the one pipeline of the cached and paged calls
// (`plan_stored_call`, `run_stored_plan`), each sequence's keys its own rows. A transformer
// encoder's `forward_packed` calls it in each layer.

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace mha {
class MultiheadAttentionImpl;
namespace detail {

/// Throws unless `module` can run `packed_self_attention` on `x` (eval mode,
/// no add_bias_kv, no add_zero_attn; x (T, embed_dim)) and `cu_seqlens`
/// (num_seqs + 1 offsets from 0 to T, non-decreasing); `caller` names the
/// entry in the messages. Returns the offsets on the host.
std::vector<int64_t> checked_packed_offsets(const MultiheadAttentionImpl& module,
                                            const torch::Tensor& x,
                                            const torch::Tensor& cu_seqlens,
                                            const char* caller);

/// x (T, E): sequence i's rows are [offsets[i], offsets[i + 1]) (checked
/// offsets on the host). Each sequence attends over its own rows only, as
/// `module.forward(x_i, x_i, x_i, need_weights=false)` on it alone (within
/// float32 rounding): one input projection over all T rows, one SDPA per
/// sequence, one output projection. -> (T, E).
torch::Tensor packed_self_attention(const MultiheadAttentionImpl& module,
                                    const torch::Tensor& x,
                                    const std::vector<int64_t>& offsets);

}  // namespace detail
}  // namespace mha
