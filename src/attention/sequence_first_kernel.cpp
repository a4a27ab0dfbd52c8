#include "attention/sequence_first_kernel.h"

#include <ATen/ATen.h>

#include <optional>

#include "attention/call_plan.h"
#include "attention/masks.h"
#include "attention/prefill/prefill_attention.h"
#include "attention/projector.h"
#include "attention/small_sdpa.h"

namespace mha {
namespace detail {

using torch::Tensor;

Tensor sequence_first_attention(const AttentionWeights& m, const AttentionCall& call) {
  const Tensor& query = call.query;  // (L, N, E)
  const int64_t num_heads = m.options.num_heads();
  const int64_t tgt_len = query.size(0), bsz = query.size(1), embed_dim = query.size(2);
  const int64_t head_dim = embed_dim / num_heads;

  // Python's one linear over the contiguous (L, N, E) input (one addmm). Its
  // steps then copy q, k and v apart; SDPA reads the same values in place
  // from (N, H, L, hd) views, and its result is the same bits.
  const Tensor qkv = Projector::of(m).fused_qkv(query).view(
      {tgt_len, bsz, 3, num_heads, head_dim});              // (L, N, 3, H, hd)
  const Tensor q = qkv.select(2, 0).permute({1, 2, 0, 3});  // (N, H, L, hd)
  const Tensor k = qkv.select(2, 1).permute({1, 2, 0, 3});  // (N, H, L, hd)
  const Tensor v = qkv.select(2, 2).permute({1, 2, 0, 3});  // (N, H, L, hd)

  // Python's masks: with the causal hint and no key padding mask, SDPA's causal
  // mode (attn_mask dropped); else attn_mask and key padding merged, additive.
  const bool causal = call.is_causal && !call.key_padding_mask.defined();
  Tensor out;  // (L * N, E)
  if (!causal && !call.masked() && takes_prefill_attention(m, q, k, v)) {
    // written straight into the output projection's rows
    out = prefill_attention_rows(q, k, v, /*sequence_first=*/true)
              .view({tgt_len * bsz, embed_dim});  // (L * N, E)
  } else {
    std::optional<Tensor> additive;  // an undefined Tensor would be rejected
    if (!causal && call.masked()) {
      const Tensor masked = merged_bool_mask(call.attn_mask, call.key_padding_mask, bsz, num_heads,
                                             tgt_len);    // (N|1, H|1, L|1, L)
      additive = additive_mask(masked, query.options());  // the same shape, 0 or -inf
    }
    out = sdpa(q, k, v, additive, causal);                                          // (N, H, L, hd)
    out = out.permute({2, 0, 1, 3}).contiguous().view({tgt_len * bsz, embed_dim});  // (L * N, E)
  }
  out = Projector::output(m, out);             // (L * N, E)
  return out.view({tgt_len, bsz, embed_dim});  // (L, N, E)
}

}  // namespace detail
}  // namespace mha
