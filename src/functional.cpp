// The functional API (mha/functional.h): Python's `F.multi_head_attention_forward`
// and `F._canonical_mask`. The steps themselves are the attention pipeline's
// (src/attention/functional_steps.cpp, src/attention/masks.cpp).

#include "mha/functional.h"

#include <optional>

#include "attention/functional_steps.h"
#include "attention/masks.h"

namespace mha {
namespace functional {

using torch::Tensor;

Tensor canonical_mask(const Tensor& mask,
                      const std::string& mask_name,
                      std::optional<c10::ScalarType> other_type,
                      const std::string& other_name,
                      c10::ScalarType target_type,
                      bool check_other) {
  const bool checked = check_other && other_type.has_value();
  return detail::canonical_mask(
      mask, mask_name, target_type,
      checked ? std::make_optional(std::make_pair(*other_type, other_name)) : std::nullopt);
}

std::tuple<Tensor, Tensor> multi_head_attention_forward(
    const Tensor& query,
    const Tensor& key,
    const Tensor& value,
    const MultiheadAttentionForwardFuncOptions& o) {
  return detail::multi_head_attention_forward(query, key, value, o, std::nullopt, nullptr);
}

}  // namespace functional
}  // namespace mha
