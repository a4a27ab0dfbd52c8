#include "attention/masks.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <limits>

namespace mha {
namespace detail {

using torch::Tensor;

Tensor canonical_mask(const Tensor& mask,
                      const std::string& mask_name,
                      c10::ScalarType target_type,
                      const std::optional<std::pair<c10::ScalarType, std::string>>& other) {
  if (!mask.defined()) {
    return mask;
  }
  const bool is_float = at::isFloatingType(mask.scalar_type());
  TORCH_CHECK_TYPE(mask.scalar_type() == at::kBool || is_float,
                   fmt::format("only bool and floating types of {} are supported, but got {}",
                               mask_name, c10::toString(mask.scalar_type())));
  // Once per process, as Python's default warning filter shows it once per call site.
  if (other && mask.scalar_type() != other->first) {
    TORCH_WARN_ONCE(fmt::format(
        "Support for mismatched {} and {} is deprecated. Use same type for both instead.",
        mask_name, other->second));
  }
  if (is_float) {
    return mask;
  }
  // bool (any shape) -> additive float of the query's dtype: true -> -inf
  return at::zeros_like(mask, mask.options().dtype(target_type))
      .masked_fill_(mask, -std::numeric_limits<double>::infinity());
}

Tensor canonical_key_padding_mask(const Tensor& key_padding_mask,
                                  const Tensor& attn_mask,
                                  c10::ScalarType target_type,
                                  std::pair<const char*, const char*> names) {
  // Python's F._none_or_dtype(attn_mask): no check without an attn_mask
  const auto other =
      attn_mask.defined()
          ? std::make_optional(std::make_pair(attn_mask.scalar_type(), std::string(names.second)))
          : std::nullopt;
  return canonical_mask(key_padding_mask, names.first, target_type, other);
}

Tensor canonical_attn_mask(const Tensor& attn_mask, c10::ScalarType target_type, const char* name) {
  return canonical_mask(attn_mask, name, target_type);
}

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

Tensor causal_mask(int64_t queries, int64_t keys, const at::TensorOptions& options) {
  // (L, S) bool: true where j > S - L + i
  return at::ones({queries, keys}, options.dtype(at::kBool)).triu_(keys - queries + 1);
}

Tensor additive_mask(const Tensor& masked, const at::TensorOptions& options) {
  if (!masked.defined()) return Tensor();
  return at::zeros(masked.sizes(), options)
      .masked_fill_(masked, -std::numeric_limits<double>::infinity());
}

Tensor pad_visible_keys(const Tensor& mask, int64_t columns) {
  return mask.defined() ? at::constant_pad_nd(mask, {0, columns}) : mask;
}

Tensor cached_call_mask(const Tensor& key_padding_mask,
                        const Tensor& attn_mask,
                        bool self_attention,
                        const CachedMaskSizes& sizes,
                        const at::TensorOptions& options) {
  const auto dtype = c10::typeMetaToScalarType(options.dtype());
  const int64_t n = sizes.batch, l = sizes.new_len, s = sizes.total_len;
  const Tensor kpm = canonical_key_padding_mask(key_padding_mask, attn_mask, dtype);
  Tensor mask = canonical_attn_mask(attn_mask, dtype);
  if (mask.defined()) {
    // (L, S) -> (1, 1, L, S); (N * H, L, S) -> (N, H, L, S)
    mask = mask.dim() == 2 ? mask.reshape({1, 1, l, s}) : mask.reshape({n, sizes.heads, l, s});
  }
  if (self_attention && l > 1) {
    // (L, S) bool -> (1, 1, L, S) additive: new query i sees key j iff j <= S - L + i
    const Tensor causal = additive_mask(causal_mask(l, s, options.device()), options);
    const Tensor causal4 = causal.view({1, 1, l, s});
    mask = mask.defined() ? mask + causal4 : causal4;
  }
  if (kpm.defined()) {
    const Tensor kpm4 = kpm.reshape({n, 1, 1, s});  // (N, 1, 1, S)
    mask = mask.defined() ? mask + kpm4 : kpm4;
  }
  if (mask.defined() && sizes.extra > 0) {
    mask = pad_visible_keys(mask, sizes.extra);  // (.., S + extra)
  }
  return mask;
}

}  // namespace detail
}  // namespace mha
