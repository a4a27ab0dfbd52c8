#include "fast_path.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "masks.h"
#include "mha/functional.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

/// The device and grad conditions that end Python's `why_not_fast_path`.
std::string why_not_devices_or_grad(const MultiheadAttentionImpl& m, const Tensor& query) {
  bool needs_grad = false;
  for (const Tensor* t :
       {&query, &m.in_proj_weight, &m.in_proj_bias, &m.out_proj->weight, &m.out_proj->bias}) {
    if (!t->defined()) continue;
    const auto type = t->device().type();
    if (type != c10::DeviceType::CPU && type != c10::DeviceType::CUDA &&
        type != c10::DeviceType::PrivateUse1) {
      return "some Tensor argument's device is neither one of cpu, cuda or privateuse1";
    }
    needs_grad = needs_grad || t->requires_grad();
  }
  if (torch::GradMode::is_enabled() && needs_grad) {
    return "grad is enabled and at least one of query or the input/output projection weights or "
           "biases requires_grad";
  }
  return "";
}

/// The module's conditions of Python's `why_not_fast_path`, after the inputs'.
std::string why_not_module(const MultiheadAttentionImpl& m, const Tensor& query) {
  const auto& o = m.options;
  const int64_t embed_dim = o.embed_dim();
  if (m.in_proj_bias.defined() && query.scalar_type() != m.in_proj_bias.scalar_type()) {
    return "dtypes of query and self.in_proj_bias don't match";
  }
  if (!m.in_proj_weight.defined()) return "in_proj_weight was None";
  if (query.scalar_type() != m.in_proj_weight.scalar_type()) {
    return "dtypes of query and self.in_proj_weight don't match";
  }
  if (m.is_training()) return "training is enabled";
  if (o.num_heads() % 2 != 0) return "self.num_heads is not even";
  if (!o.batch_first()) return "batch_first was not True";
  if (m.bias_k.defined()) return "self.bias_k was not None";
  if (m.bias_v.defined()) return "self.bias_v was not None";
  if (o.add_zero_attn()) return "add_zero_attn was enabled";
  if (o.kdim().value_or(embed_dim) != embed_dim || o.vdim().value_or(embed_dim) != embed_dim) {
    return "_qkv_same_embed_dim was not True";
  }
  return "";
}

/// Python's native fast path exactly as Python calls it: masks canonicalised
/// to float and merged by `merge_masks` (kpm alone (N, S), type 1; any
/// attn_mask expanded to (N, H, L, L), type 2).
std::tuple<Tensor, Tensor> python_native(const MultiheadAttentionImpl& m,
                                         const Tensor& query,
                                         const Tensor& key_padding_mask,
                                         const Tensor& attn_mask,
                                         bool need_weights,
                                         bool average_attn_weights) {
  const auto dtype = query.scalar_type();
  const Tensor kpm = canonical_key_padding_mask(key_padding_mask, attn_mask, dtype);
  const Tensor mask =
      functional::canonical_mask(attn_mask, "attn_mask", std::nullopt, "", dtype, false);
  const auto [merged, mask_type] = merge_masks(mask, kpm, query, m.options.num_heads());
  return at::_native_multi_head_attention(query, query, query, m.options.embed_dim(),
                                          m.options.num_heads(), m.in_proj_weight, m.in_proj_bias,
                                          m.out_proj->weight, m.out_proj->bias, merged,
                                          need_weights, average_attn_weights, mask_type);
}

/// The bool masks (true = masked out) merged into one bool mask broadcastable
/// to (N, H, L, L): attn_mask (L, L) -> (1, 1, L, L) or (N * H, L, L) ->
/// (N, H, L, L), key_padding_mask (N, L) -> (N, 1, 1, L). Undefined if both are.
Tensor merged_bool_mask(const Tensor& attn_mask,
                        const Tensor& key_padding_mask,
                        int64_t bsz,
                        int64_t num_heads,
                        int64_t seq_len) {
  Tensor merged;
  if (attn_mask.defined()) {
    merged = attn_mask.dim() == 2 ? attn_mask.reshape({1, 1, seq_len, seq_len})
                                  : attn_mask.reshape({bsz, num_heads, seq_len, seq_len});
  }
  if (key_padding_mask.defined()) {
    const Tensor kpm = key_padding_mask.reshape({bsz, 1, 1, seq_len});
    merged = merged.defined() ? at::logical_or(merged, kpm) : kpm;
  }
  return merged;
}

/// The native op with bool masks in their smallest form. The native op reads a
/// bool mask as (L, L) for type 0, (N, L) for type 1 and (N, H, L, L) for type
/// 2; Python hands it float masks merged into (N, H, L, L), which it converts
/// back to bool. The same mask in its smallest bool form masks the same
/// scores, so the numbers are the same bits.
std::tuple<Tensor, Tensor> native_lean_masks(const MultiheadAttentionImpl& m,
                                             const Tensor& query,
                                             const Tensor& key_padding_mask,
                                             const Tensor& attn_mask,
                                             bool need_weights,
                                             bool average_attn_weights) {
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
  return at::_native_multi_head_attention(
      query, query, query, embed_dim, num_heads, m.in_proj_weight, m.in_proj_bias,
      m.out_proj->weight, m.out_proj->bias, mask, need_weights, average_attn_weights, mask_type);
}

/// The packed projection of the fast-path kernels: (N, L, 3E) viewed as
/// (N, L, 3, H, hd), whose q, k and v slices keep a unit last stride, so that
/// SDPA and the batched GEMMs read them in place.
Tensor packed_qkv(const MultiheadAttentionImpl& m, const Tensor& query) {
  const int64_t num_heads = m.options.num_heads();
  const int64_t bsz = query.size(0), seq_len = query.size(1), embed_dim = query.size(2);
  return at::linear(query, m.in_proj_weight, m.in_proj_bias)
      .view({bsz, seq_len, 3, num_heads, embed_dim / num_heads});
}

/// A bool mask (true = masked out) as an additive one of `options`: -inf where
/// masked, 0 elsewhere; undefined stays undefined.
Tensor additive_mask(const Tensor& masked, const at::TensorOptions& options) {
  if (!masked.defined()) return Tensor();
  return at::zeros(masked.sizes(), options)
      .masked_fill_(masked, -std::numeric_limits<double>::infinity());
}

/// The fused kernel: query (N, L, E) -> (N, L, E). Masks as the native op
/// reads them (true = masked out); a row masked out entirely in any head gives
/// a NaN output row, as the native op's softmax does (SDPA itself gives 0).
Tensor fused_sdpa(const MultiheadAttentionImpl& m,
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

  Tensor out = at::scaled_dot_product_attention(q, k, v, additive, /*dropout_p=*/0.0, causal);
  // (N, H, L, hd) -> (N, L, E): the CPU flash kernel writes (N, L, H, hd), so
  // this is a view; other backends may copy.
  out = out.transpose(1, 2).reshape({bsz, seq_len, embed_dim});
  out = at::linear(out, m.out_proj->weight, m.out_proj->bias);  // (N, L, E)

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
std::tuple<Tensor, Tensor> by_head_attention(const MultiheadAttentionImpl& m,
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
  const Tensor out = at::linear(attended.view({bsz, seq_len, embed_dim}), m.out_proj->weight,
                                m.out_proj->bias);  // (N, L, E)
  return {out, weights};
}

}  // namespace

std::pair<std::optional<Tensor>, std::optional<int64_t>> merge_masks(const Tensor& attn_mask,
                                                                     const Tensor& key_padding_mask,
                                                                     const Tensor& query,
                                                                     int64_t num_heads) {
  std::optional<Tensor> merged;
  std::optional<int64_t> mask_type;
  if (key_padding_mask.defined()) {
    merged = key_padding_mask;  // (N, S)
    mask_type = 1;
  }
  if (attn_mask.defined()) {  // then query is not nested: (N, L, E)
    const int64_t bsz = query.size(0), seq_len = query.size(1);
    mask_type = 2;
    merged = attn_mask.dim() == 3 ? attn_mask.view({bsz, -1, seq_len, seq_len})
                                  : attn_mask.view({1, 1, seq_len, seq_len})
                                        .expand({bsz, num_heads, -1, -1});  // (N, H, L, L)
    if (key_padding_mask.defined()) {
      merged =
          *merged + key_padding_mask.view({bsz, 1, 1, seq_len}).expand({-1, num_heads, -1, -1});
    }
  }
  return {merged, mask_type};
}

std::string why_not_fast_path(const MultiheadAttentionImpl& m,
                              const Tensor& query,
                              const Tensor& key,
                              const Tensor& value,
                              const Tensor& key_padding_mask,
                              const Tensor& attn_mask) {
  auto not_bool = [](const Tensor& mask) {
    return mask.defined() && mask.scalar_type() != at::kBool;
  };
  if (not_bool(attn_mask) || not_bool(key_padding_mask)) {
    return "floating-point masks are not supported for fast path.";
  }
  if (!get_fastpath_enabled()) {
    return "torch.backends.mha.get_fastpath_enabled() was not True";
  }
  if (query.dim() != 3) {
    return fmt::format("input not batched; expected query.dim() of 3 but got {}", query.dim());
  }
  if (!query.is_same(key) || !key.is_same(value)) {
    return "non-self attention was used (query, key, and value are not the same Tensor)";
  }
  std::string reason = why_not_module(m, query);
  if (!reason.empty()) return reason;
  if (query.is_nested() && (key_padding_mask.defined() || attn_mask.defined())) {
    return "supplying both src_key_padding_mask and src_mask at the same time is not supported "
           "with NestedTensor input";
  }
  if (at::autocast::is_autocast_enabled(at::kCUDA)) return "autocast is enabled";
  return why_not_devices_or_grad(m, query);
}

FastPathKernel choose_fast_path_kernel(int64_t batch,
                                       int64_t seq_len,
                                       bool need_weights,
                                       bool masked) {
  const int64_t min_length = !masked && batch == 1 ? kUnmaskedSingleMinLength
                             : need_weights        ? kByHeadMinLength
                                                   : kFusedMinLength;
  if (seq_len < min_length) return FastPathKernel::kNative;
  return need_weights ? FastPathKernel::kByHead : FastPathKernel::kFused;
}

std::tuple<Tensor, Tensor> fast_path_forward(FastPathKernel kernel,
                                             const MultiheadAttentionImpl& module,
                                             const Tensor& query,
                                             const Tensor& key_padding_mask,
                                             bool need_weights,
                                             const Tensor& attn_mask,
                                             bool average_attn_weights,
                                             bool is_causal) {
  switch (kernel) {
    case FastPathKernel::kPython:
      return python_native(module, query, key_padding_mask, attn_mask, need_weights,
                           average_attn_weights);
    case FastPathKernel::kNative:
      return native_lean_masks(module, query, key_padding_mask, attn_mask, need_weights,
                               average_attn_weights);
    case FastPathKernel::kFused:
      TORCH_CHECK(!need_weights, "the fused fast-path kernel returns no attention weights");
      return {fused_sdpa(module, query, key_padding_mask, attn_mask, is_causal), Tensor()};
    case FastPathKernel::kByHead: {
      TORCH_CHECK(need_weights, "the head-by-head fast-path kernel is for calls with weights");
      const Tensor masked = merged_bool_mask(attn_mask, key_padding_mask, query.size(0),
                                             module.options.num_heads(), query.size(1));
      return by_head_attention(module, query, masked, average_attn_weights);
    }
  }
  TORCH_CHECK(false, "unknown fast-path kernel");
}

}  // namespace detail
}  // namespace mha
