#include "attention/fast_kernels.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "attention/masks.h"
#include "attention/prefill/prefill_attention.h"
#include "attention/projector.h"
#include "attention/small_sdpa.h"
#include "linear/int8_linear.h"
#include "linear/weight_form.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

/// Python's native fast path exactly as Python calls it: masks canonicalised
/// to float and merged by `merge_masks` (kpm alone (N, S), type 1; any
/// attn_mask expanded to (N, H, L, L), type 2). Prepacked weights
/// (`mha::prepack`) are unpacked for it: Python's op takes float weights.
std::tuple<Tensor, Tensor> python_native(const AttentionWeights& m, const AttentionCall& c) {
  const auto dtype = c.query.scalar_type();
  const Tensor kpm = canonical_key_padding_mask(c.key_padding_mask, c.attn_mask, dtype);
  const Tensor mask = canonical_attn_mask(c.attn_mask, dtype);
  const auto [merged, mask_type] = merge_masks(mask, kpm, c.query, m.options.num_heads());
  return at::_native_multi_head_attention(
      c.query, c.query, c.query, m.options.embed_dim(), m.options.num_heads(),
      float_weight(m.owner, "in_proj_weight", m.in_proj_weight), m.in_proj_bias,
      float_weight(*m.out_proj, "weight", m.out_proj->weight), m.out_proj->bias, merged,
      c.need_weights, c.average_attn_weights, mask_type);
}

/// The native op with bool masks in their smallest form. The native op reads a
/// bool mask as (L, L) for type 0, (N, L) for type 1 and (N, H, L, L) for type
/// 2; Python hands it float masks merged into (N, H, L, L), which it converts
/// back to bool. The same mask in its smallest bool form masks the same
/// scores, so the numbers are the same bits.
std::tuple<Tensor, Tensor> native_lean_masks(const AttentionWeights& m, const AttentionCall& c) {
  const Tensor &query = c.query, &key_padding_mask = c.key_padding_mask, &attn_mask = c.attn_mask;
  const int64_t num_heads = m.options.num_heads();
  const int64_t bsz = query.size(0), seq_len = query.size(1), embed_dim = query.size(2);
  std::optional<Tensor> mask;
  std::optional<int64_t> mask_type;
  if (attn_mask.defined() && attn_mask.dim() == 2 && !key_padding_mask.defined()) {
    mask = attn_mask;  // (L, L)
    mask_type = 0;
  } else if (!attn_mask.defined() && key_padding_mask.defined()) {
    mask = key_padding_mask;  // (N, L)
    mask_type = 1;
  } else if (attn_mask.defined()) {
    mask = merged_bool_mask(attn_mask, key_padding_mask, bsz, num_heads, seq_len)
               .expand({bsz, num_heads, seq_len, seq_len});  // (N, H, L, L)
    mask_type = 2;
  }
  return at::_native_multi_head_attention(query, query, query, embed_dim, num_heads,
                                          m.in_proj_weight, m.in_proj_bias, m.out_proj->weight,
                                          m.out_proj->bias, mask, c.need_weights,
                                          c.average_attn_weights, mask_type);
}

/// The packed projection of the fast-path kernels: (N, L, 3E) viewed as
/// (N, L, 3, H, hd), whose q, k and v slices keep a unit last stride, so that
/// SDPA and the batched GEMMs read them in place.
Tensor packed_qkv(const AttentionWeights& m, const Tensor& query) {
  const int64_t num_heads = m.options.num_heads();
  const int64_t bsz = query.size(0), seq_len = query.size(1), embed_dim = query.size(2);
  return Projector::of(m).fused_qkv(query).view(
      {bsz, seq_len, 3, num_heads, embed_dim / num_heads});
}

/// The fused kernel: query (N, L, E) -> (N, L, E). Masks as the native op
/// reads them (true = masked out); a row masked out entirely in any head gives
/// a NaN output row, as the native op's softmax does (SDPA itself gives 0).
Tensor fused_sdpa(const AttentionWeights& m,
                  const Tensor& query,
                  const Tensor& key_padding_mask,
                  const Tensor& attn_mask,
                  bool is_causal) {
  const int64_t num_heads = m.options.num_heads();
  const int64_t bsz = query.size(0), seq_len = query.size(1), embed_dim = query.size(2);

  // One GEMM for q, k and v; each of q, k, v is an (N, H, L, hd) view.
  const Tensor qkv = packed_qkv(m, query);  // (N, L, 3, H, hd)
  const Tensor q = qkv.select(2, 0).transpose(1, 2);
  const Tensor k = qkv.select(2, 1).transpose(1, 2);
  const Tensor v = qkv.select(2, 2).transpose(1, 2);

  // An attn_mask flagged causal, alone, becomes SDPA's is_causal (no mask
  // tensor); else one additive mask broadcastable to (N, H, L, L).
  const bool causal = attn_mask.defined() && is_causal && !key_padding_mask.defined();
  const Tensor masked =
      causal ? Tensor() : merged_bool_mask(attn_mask, key_padding_mask, bsz, num_heads, seq_len);
  std::optional<Tensor> additive;  // an undefined Tensor would be rejected
  if (masked.defined()) {
    additive = additive_mask(masked, query.options());
  }

  Tensor out;  // (N, L, E)
  if (!masked.defined() && !causal && takes_prefill_attention(m, q, k, v)) {
    out = prefill_attention_rows(q, k, v, /*sequence_first=*/false);  // (N, L, E)
  } else {
    out = sdpa(q, k, v, additive, causal);
    // (N, H, L, hd) -> (N, L, E): the CPU flash kernel writes (N, L, H, hd), so
    // this is a view; other backends may copy.
    out = out.transpose(1, 2).reshape({bsz, seq_len, embed_dim});
  }
  out = Projector::output(m, out);  // (N, L, E)

  if (masked.defined()) {
    // The native op's NaN for a row with no key left, spread over the row by
    // the output projection.
    const Tensor dead = masked.all(/*dim=*/-1).any(/*dim=*/1).unsqueeze(-1);  // (N|1, L|1, 1)
    out.masked_fill_(dead, std::numeric_limits<double>::quiet_NaN());
  }
  return out;
}

/// Rows [r0, r1) of head h's attention: probabilities (N, R, S) =
/// softmax(scale * q k^T + mask), written into `attended` (N, L, H, hd) as
/// probabilities @ v. Returns the probabilities (NaN for a row with no key
/// left, as the native op's softmax gives).
Tensor attend_rows(const Tensor& q,         // (N, L, hd), head h
                   const Tensor& k,         // (N, S, hd)
                   const Tensor& v,         // (N, S, hd)
                   const Tensor& additive,  // (N|1, L|1, S) or undefined
                   double scale,
                   int64_t h,
                   int64_t r0,
                   int64_t r1,
                   Tensor& attended) {
  const Tensor q_rows = q.slice(1, r0, r1);  // (N, R, hd)
  Tensor scores;                             // (N, R, S)
  if (additive.defined()) {
    const Tensor mask = additive.size(1) == 1 ? additive : additive.slice(1, r0, r1);
    scores = at::baddbmm(mask.expand({q.size(0), r1 - r0, k.size(1)}), q_rows, k.transpose(1, 2),
                         /*beta=*/1.0, /*alpha=*/scale);
  } else {
    scores = at::bmm(q_rows, k.transpose(1, 2)).mul_(scale);
  }
  Tensor probabilities = at::softmax(scores, /*dim=*/-1);
  attended.select(2, h).slice(1, r0, r1).copy_(at::bmm(probabilities, v));  // (N, R, hd)
  return probabilities;
}

/// The head-by-head kernel: query (N, L, E), `masked` the merged bool mask
/// (true = masked out) broadcastable to (N, H, L, L), or undefined. Returns
/// (output (N, L, E), weights (N, L, S) averaged or (N, H, L, S)). Heads are
/// taken one at a time and rows in blocks of about 2^20 scores, so averaged
/// weights hold the (N, L, S) result and two blocks, never (N, H, L, S).
std::tuple<Tensor, Tensor> by_head_attention(const AttentionWeights& m,
                                             const Tensor& query,
                                             const Tensor& masked,
                                             bool average_attn_weights) {
  const int64_t num_heads = m.options.num_heads();
  const int64_t bsz = query.size(0), seq_len = query.size(1), embed_dim = query.size(2);
  const int64_t head_dim = embed_dim / num_heads;
  const Tensor qkv = packed_qkv(m, query);  // (N, L, 3, H, hd): head h's q, k, v are (N, L, hd)
  const Tensor additive = additive_mask(masked, query.options());  // (N|1, H|1, L|1, S)
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const int64_t block =
      std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(1, bsz * seq_len));
  Tensor attended = at::empty({bsz, seq_len, num_heads, head_dim}, query.options());
  Tensor weights = average_attn_weights
                       ? at::empty({bsz, seq_len, seq_len}, query.options())
                       : at::empty({bsz, num_heads, seq_len, seq_len}, query.options());
  for (int64_t h = 0; h < num_heads; ++h) {
    const Tensor head_mask =
        additive.defined() ? additive.select(1, additive.size(1) == 1 ? 0 : h) : Tensor();
    for (int64_t r0 = 0; r0 < seq_len; r0 += block) {
      const int64_t r1 = std::min(seq_len, r0 + block);
      const Tensor p =
          attend_rows(qkv.select(2, 0).select(2, h), qkv.select(2, 1).select(2, h),
                      qkv.select(2, 2).select(2, h), head_mask, scale, h, r0, r1, attended);
      Tensor into =
          average_attn_weights ? weights.slice(1, r0, r1) : weights.select(1, h).slice(1, r0, r1);
      if (average_attn_weights && h > 0) {
        into.add_(p);  // the heads summed in order, as the mean over dim 1 sums them
      } else {
        into.copy_(p);
      }
    }
  }
  if (average_attn_weights) {
    weights.div_(static_cast<double>(num_heads));  // (N, L, S): the mean over heads
  }
  const Tensor out = Projector::output(m, attended.view({bsz, seq_len, embed_dim}));  // (N, L, E)
  return {out, weights};
}

}  // namespace

std::tuple<Tensor, Tensor> fast_path_forward(AttentionKernel kernel,
                                             const AttentionWeights& module,
                                             const AttentionCall& call) {
  switch (kernel) {
    case AttentionKernel::kPython:
      return python_native(module, call);
    case AttentionKernel::kNative:
      return native_lean_masks(module, call);
    case AttentionKernel::kFused:
      TORCH_CHECK(!call.need_weights, "the fused fast-path kernel returns no attention weights");
      return {fused_sdpa(module, call.query, call.key_padding_mask, call.attn_mask, call.is_causal),
              Tensor()};
    case AttentionKernel::kByHead: {
      TORCH_CHECK(call.need_weights, "the head-by-head fast-path kernel is for calls with weights");
      const Tensor masked = merged_bool_mask(call.attn_mask, call.key_padding_mask,
                                             call.query.size(0), module.options.num_heads(),
                                             call.query.size(1));  // (N|1, H|1, L|1, L)
      return by_head_attention(module, call.query, masked, call.average_attn_weights);
    }
    case AttentionKernel::kFunctional:
    case AttentionKernel::kSequenceFirst:
    case AttentionKernel::kDecode:
    case AttentionKernel::kOverKeys:
    case AttentionKernel::kOverKeysWithWeights:
      break;
  }
  TORCH_CHECK(false, "fast_path_forward: not a fast-path kernel");
}

}  // namespace detail
}  // namespace mha
