#include <limits>

#include "attention/masks.h"
#include "mha/transformer_coder.h"

namespace mha {

torch::Tensor generate_square_subsequent_mask(int64_t sz, const torch::TensorOptions& options) {
  // (sz, sz): -inf above the diagonal, 0 on and below it
  const torch::Tensor causal = detail::causal_mask(sz, sz, options.device());  // (sz, sz) bool
  return detail::additive_mask(causal, options.requires_grad(false))
      .requires_grad_(options.requires_grad());
}

bool detect_is_causal_mask(const torch::Tensor& mask,
                           std::optional<bool> is_causal,
                           std::optional<int64_t> size) {
  if (is_causal.has_value() || !mask.defined()) {
    return is_causal.value_or(false);
  }
  const int64_t sz = size.value_or(mask.size(-2));
  const torch::Tensor causal =
      generate_square_subsequent_mask(sz, mask.options());  // (sz, sz) of the mask's dtype
  // Python compares sizes first, then element-wise (no torch.equal: batched masks broadcast).
  return mask.sizes() == causal.sizes() && at::eq(mask, causal).all().item<bool>();
}

}  // namespace mha
