#pragma once

// Private: mask canonicalisation as Python's callers of `_canonical_mask` do it.

#include <c10/core/ScalarType.h>
#include <torch/types.h>

namespace mha {
namespace detail {

/// Python's `_canonical_mask(key_padding_mask, "key_padding_mask",
/// _none_or_dtype(attn_mask), "attn_mask", target_type)`: bool becomes
/// additive (`true` -> -inf) of `target_type`, float stays, other dtypes are
/// rejected, and a dtype other than `attn_mask`'s warns (once per process).
torch::Tensor canonical_key_padding_mask(const torch::Tensor& key_padding_mask,
                                         const torch::Tensor& attn_mask,
                                         c10::ScalarType target_type);

}  // namespace detail
}  // namespace mha
