// mha::functional::MultiheadAttentionForwardFuncOptions (mha/functional_options.h).

#include "mha/functional_options.h"

#include <utility>

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

}  // namespace functional
}  // namespace mha
