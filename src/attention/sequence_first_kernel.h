#pragma once

// Private: the sequence-first kernel (`AttentionKernel::kSequenceFirst`): a
// sequence-first self-attention call without weights, which Python computes
// with its functional steps only because the module is not `batch_first`.

#include <torch/types.h>

#include "attention/attention_call.h"
#include "attention/attention_weights.h"

namespace mha {

namespace detail {

/// Python's `F.multi_head_attention_forward` for `call` (query (L, N, E), q is
/// k is v, no weights, bool masks, `is_causal` with its `attn_mask`) without
/// its copies: one linear over the (L, N, E) input, q, k and v as (N, H, L, hd)
/// views of it, SDPA with the masks merged as bool (the same additive values
/// as Python's float merge), Python's `permute(2, 0, 1, 3).contiguous()` and
/// the output linear. Returns a contiguous (L, N, E): Python's bits on float
/// weights; on prepacked weights, mha's GEMMs (within float32 rounding).
torch::Tensor sequence_first_attention(const AttentionWeights& module, const AttentionCall& call);

}  // namespace detail
}  // namespace mha
