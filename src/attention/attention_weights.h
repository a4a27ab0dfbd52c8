#pragma once

// Private: a view of one attention's parameters and options, the one thing
// the plan and the kernels read of a module. The front ends make it from
// what they hold (a `MultiheadAttention`, a tensor-parallel shard), so
// attention/ depends on no module type.

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <memory>
#include <string>

#include "linear/weight_form.h"
#include "mha/multihead_attention_options.h"

namespace mha {
namespace detail {

/// One attention's parameters (views of the module's own; valid while it
/// lives), named as `MultiheadAttentionImpl` names them.
struct AttentionWeights {
  /// The module: the converted forms of its weights (`weight_form`), its mode.
  const torch::nn::Module& owner;
  /// The whole module's options (a shard's too).
  const MultiheadAttentionOptions& options;
  const torch::Tensor& in_proj_weight;  ///< (3E', E) or undefined
  const torch::Tensor& q_proj_weight;   ///< (E', E) or undefined
  const torch::Tensor& k_proj_weight;   ///< (E', kdim) or undefined
  const torch::Tensor& v_proj_weight;   ///< (E', vdim) or undefined
  const torch::Tensor& in_proj_bias;    ///< (3E') or undefined
  const torch::Tensor& bias_k;          ///< (1, 1, E') or undefined
  const torch::Tensor& bias_v;          ///< (1, 1, E') or undefined
  const torch::nn::Linear& out_proj;    ///< E' -> E

  /// Whether the module is in training mode.
  bool is_training() const { return owner.is_training(); }

  /// The view of `module`'s parameters (any module with these members).
  template <typename Module>
  static AttentionWeights of(const Module& module) {
    return {module,
            module.options,
            module.in_proj_weight,
            module.q_proj_weight,
            module.k_proj_weight,
            module.v_proj_weight,
            module.in_proj_bias,
            module.bias_k,
            module.bias_v,
            module.out_proj};
  }
};

/// The form of the owner's parameter `name` (`weight_form` of linear/), so that
/// code reading a module's weights reads their view the same way.
inline std::shared_ptr<const WeightForm> weight_form(const AttentionWeights& weights,
                                                     const std::string& name) {
  return weight_form(weights.owner, name);
}

}  // namespace detail
}  // namespace mha
