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

MultiheadAttentionForwardFuncOptions::MultiheadAttentionForwardFuncOptions(
    int64_t embed_dim_to_check,
    int64_t num_heads,
    Tensor in_proj_weight,
    Tensor in_proj_bias,
    Tensor bias_k,
    Tensor bias_v,
    bool add_zero_attn,
    double dropout_p,
    Tensor out_proj_weight,
    Tensor out_proj_bias)
    : embed_dim_to_check_(embed_dim_to_check),
      num_heads_(num_heads),
      in_proj_weight_(std::move(in_proj_weight)),
      in_proj_bias_(std::move(in_proj_bias)),
      bias_k_(std::move(bias_k)),
      bias_v_(std::move(bias_v)),
      add_zero_attn_(add_zero_attn),
      dropout_p_(dropout_p),
      out_proj_weight_(std::move(out_proj_weight)),
      out_proj_bias_(std::move(out_proj_bias)) {}

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
