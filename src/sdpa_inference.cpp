#include "sdpa_inference.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <limits>

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

std::atomic<int64_t> min_length_override{0};
std::atomic<bool> fast_path_forward_enabled{true};

}  // namespace

void set_sdpa_inference_min_length(int64_t min_length) {
  min_length_override.store(min_length);
}

void set_fast_path_forward_enabled(bool enabled) {
  fast_path_forward_enabled.store(enabled);
}

bool fast_path_forward_is_enabled() {
  return fast_path_forward_enabled.load();
}

int64_t sdpa_inference_min_length() {
  const int64_t v = min_length_override.load();
  return v >= 1 ? v : kSdpaInferenceMinLength;
}

namespace {

/// `at::_native_multi_head_attention` on batch-first self-attention with bool
/// masks (true = masked out) passed as (L, L) type 0, (N, L) type 1, or merged
/// (N, H, L, L) type 2 only when both are given. Returns (output, weights).
std::tuple<Tensor, Tensor> native_self_attention(const MultiheadAttentionImpl& module,
                                                 const Tensor& query,
                                                 const Tensor& key_padding_mask,
                                                 const Tensor& attn_mask,
                                                 bool need_weights,
                                                 bool average_attn_weights) {
  const int64_t num_heads = module.options.num_heads();
  const int64_t bsz = query.size(0), seq_len = query.size(1), embed_dim = query.size(2);
  // The native op reads a bool mask (true = masked out) as (L, L) for type 0,
  // (N, L) for type 1 and (N, H, L, L) for type 2. Python hands it float
  // masks merged into (N, H, L, L) (merge_masks), which it converts back to
  // bool; the same mask, given in its smallest bool form, masks the same
  // scores, so the numbers are the same bits.
  std::optional<Tensor> mask;
  std::optional<int64_t> mask_type;
  if (attn_mask.defined()) {
    const Tensor am = attn_mask.dim() == 2
        ? attn_mask.reshape({1, 1, seq_len, seq_len})
        : attn_mask.reshape({bsz, num_heads, seq_len, seq_len});
    if (key_padding_mask.defined()) {
      mask = at::logical_or(am, key_padding_mask.reshape({bsz, 1, 1, seq_len}))
                 .expand({bsz, num_heads, seq_len, seq_len});
      mask_type = 2;
    } else if (attn_mask.dim() == 2) {
      mask = attn_mask;
      mask_type = 0;
    } else {
      mask = am;
      mask_type = 2;
    }
  } else if (key_padding_mask.defined()) {
    mask = key_padding_mask;
    mask_type = 1;
  }
  return at::_native_multi_head_attention(
      query, query, query, embed_dim, num_heads, module.in_proj_weight, module.in_proj_bias,
      module.out_proj->weight, module.out_proj->bias, mask, need_weights, average_attn_weights,
      mask_type);
}

/// The fused computation alone, without the eligibility checks: query (N, L, E)
/// batch-first self-attention with `module`'s packed (3E, E) weight and (3E)
/// bias, bool masks (true = masked out) or undefined. Returns (N, L, E). Masks follow the
/// native path: a row of scores masked out entirely in any head gives a NaN
/// output row. An `attn_mask` flagged by `is_causal` with no
/// `key_padding_mask` is trusted to be the causal mask (as Python's SDPA path
/// trusts it) and becomes SDPA's `is_causal`.
Tensor sdpa_self_attention(const MultiheadAttentionImpl& module,
                           const Tensor& query,
                           const Tensor& key_padding_mask,
                           const Tensor& attn_mask,
                           bool is_causal) {
  const int64_t num_heads = module.options.num_heads();
  const int64_t bsz = query.size(0), seq_len = query.size(1), embed_dim = query.size(2);
  const int64_t head_dim = embed_dim / num_heads;

  // One GEMM for q, k and v: (N, L, 3E), viewed as (N, L, 3, H, hd); each of
  // q, k, v is then an (N, H, L, hd) view with unit last stride, which the
  // flash kernel reads in place.
  const Tensor qkv =
      at::linear(query, module.in_proj_weight, module.in_proj_bias).view({bsz, seq_len, 3, num_heads, head_dim});
  const Tensor q = qkv.select(2, 0).transpose(1, 2);
  const Tensor k = qkv.select(2, 1).transpose(1, 2);
  const Tensor v = qkv.select(2, 2).transpose(1, 2);

  // Masks, as the native path reads them: true = masked out. An attn_mask
  // flagged causal, alone, becomes SDPA's is_causal (no mask tensor at all);
  // else the masks are merged once into one additive float mask shaped
  // (N or 1, H or 1, L or 1, S) that SDPA broadcasts.
  Tensor masked;  // bool, broadcastable to (N, H, L, S)
  bool causal = false;
  if (attn_mask.defined() && is_causal && !key_padding_mask.defined()) {
    causal = true;
  } else {
    if (attn_mask.defined()) {
      masked = attn_mask.dim() == 2 ? attn_mask.reshape({1, 1, seq_len, seq_len})
                                    : attn_mask.reshape({bsz, num_heads, seq_len, seq_len});
    }
    if (key_padding_mask.defined()) {
      const Tensor kpm = key_padding_mask.reshape({bsz, 1, 1, seq_len});
      masked = masked.defined() ? at::logical_or(masked, kpm) : kpm;
    }
  }
  std::optional<Tensor> additive;  // an undefined Tensor would be rejected
  if (masked.defined()) {
    additive = at::zeros(masked.sizes(), query.options())
                   .masked_fill_(masked, -std::numeric_limits<double>::infinity());
  }

  Tensor out = at::scaled_dot_product_attention(q, k, v, additive, /*dropout_p=*/0.0, causal);
  // (N, H, L, hd) -> (N, L, E): the CPU flash kernel writes (N, L, H, hd), so
  // this is a view; other backends may copy.
  out = out.transpose(1, 2).reshape({bsz, seq_len, embed_dim});
  out = at::linear(out, module.out_proj->weight, module.out_proj->bias);  // (N, L, E)

  if (masked.defined()) {
    // The native path's softmax gives NaN for a row with no key left (SDPA
    // gives 0), and the output projection spreads it over the whole row.
    const Tensor dead = masked.all(/*dim=*/-1).any(/*dim=*/1).unsqueeze(-1);  // (N|1, L|1, 1)
    out.masked_fill_(dead, std::numeric_limits<double>::quiet_NaN());
  }
  return out;
}

}  // namespace

std::tuple<Tensor, Tensor> fast_path_forward(
    const MultiheadAttentionImpl& module,
    const Tensor& query,
    const Tensor& key_padding_mask,
    bool need_weights,
    const Tensor& attn_mask,
    bool average_attn_weights,
    bool is_causal) {
  if (!need_weights && query.size(1) >= sdpa_inference_min_length()) {
    return std::make_tuple(
        sdpa_self_attention(module, query, key_padding_mask, attn_mask, is_causal),
        Tensor());
  }
  return native_self_attention(module, query, key_padding_mask, attn_mask, need_weights,
                               average_attn_weights);
}

}  // namespace detail
}  // namespace mha
