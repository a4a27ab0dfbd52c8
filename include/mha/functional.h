#pragma once

// Python's functional multi-head attention: `F.multi_head_attention_forward`
// and `F._canonical_mask`.

#include <mha/functional_options.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

namespace mha {
namespace functional {

/// Python's `F.multi_head_attention_forward` in sequence-first layout:
/// query (L, N, E) or (L, E), key (S, N, kdim) or (S, kdim), value likewise.
/// Returns (output, weights); weights are undefined unless `need_weights`.
std::tuple<torch::Tensor, torch::Tensor> multi_head_attention_forward(
    const torch::Tensor& query,
    const torch::Tensor& key,
    const torch::Tensor& value,
    const MultiheadAttentionForwardFuncOptions& options);

/// Python's `F._canonical_mask`: a bool mask becomes an additive float mask of
/// `target_type` (true -> -inf, false -> 0); a float mask is returned as is;
/// other dtypes are rejected. Warns, as Python does, when `other_type` is given
/// and differs from the mask's dtype.
torch::Tensor canonical_mask(const torch::Tensor& mask,
                             const std::string& mask_name,
                             std::optional<c10::ScalarType> other_type,
                             const std::string& other_name,
                             c10::ScalarType target_type,
                             bool check_other = true);

}  // namespace functional
}  // namespace mha
