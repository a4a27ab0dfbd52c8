#pragma once

// Private: Python's `F.multi_head_attention_forward` with the projector given
// (mha/functional.h builds it from its options), for callers whose weights
// are not the options' own: a tensor-parallel shard holds only its heads' rows.

#include <torch/types.h>

#include <optional>
#include <tuple>

#include "attention/projector.h"
#include "mha/functional_options.h"

namespace mha {
namespace detail {

/// `functional::multi_head_attention_forward` projecting with `projector`
/// (Python's in-projection steps, `Projector::python`, without Python's
/// checks of the key/value shapes and the weights: the caller's weights are
/// its own, and its inputs checked), or, when nullopt, with the options'
/// weights after Python's checks of them.
/// `options.num_heads()` heads of E' / num_heads features each, E' the
/// projector's rows, and an `out_proj_weight` of E' columns, or `out_form`
/// (the int8 or prepacked form of the module's `out_proj`) when not null.
std::tuple<torch::Tensor, torch::Tensor> multi_head_attention_forward(
    const torch::Tensor& query,
    const torch::Tensor& key,
    const torch::Tensor& value,
    const functional::MultiheadAttentionForwardFuncOptions& options,
    const std::optional<Projector>& projector,
    const WeightForm* out_form);

}  // namespace detail
}  // namespace mha
