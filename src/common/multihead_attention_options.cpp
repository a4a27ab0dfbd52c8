// mha::MultiheadAttentionOptions: the checks of Python's constructor
// (torch/nn/modules/activation.py, `MultiheadAttention.__init__`), with its wording.

#include "mha/multihead_attention_options.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

namespace mha {

void MultiheadAttentionOptions::validate() const {
  const int64_t embed_dim = this->embed_dim();
  const int64_t num_heads = this->num_heads();
  TORCH_CHECK_VALUE(
      embed_dim > 0 && num_heads > 0,
      fmt::format(
          "embed_dim and num_heads must be greater than 0, got embed_dim={} and num_heads={} "
          "instead",
          embed_dim, num_heads));
  TORCH_CHECK_VALUE(
      embed_dim % num_heads == 0,
      fmt::format("embed_dim must be divisible by num_heads, got embed_dim={} and num_heads={}",
                  embed_dim, num_heads));
  TORCH_CHECK_VALUE(
      dropout() >= 0.0 && dropout() <= 1.0,
      fmt::format("dropout probability has to be between 0 and 1, but got {}", dropout()));
  const int64_t key_dim = kdim().value_or(embed_dim);
  const int64_t value_dim = vdim().value_or(embed_dim);
  TORCH_CHECK_VALUE(key_dim > 0 && value_dim > 0,
                    fmt::format("kdim and vdim must be greater than 0, got kdim={} and vdim={}",
                                key_dim, value_dim));
}

}  // namespace mha
