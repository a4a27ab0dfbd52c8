#include "input_checks.h"

#include "shape_format.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <vector>

namespace mha {
namespace detail {

using torch::Tensor;


bool mha_shape_check(
    const Tensor& query,
    const Tensor& key,
    const Tensor& value,
    const Tensor& key_padding_mask,
    const Tensor& attn_mask,
    int64_t num_heads) {
  if (query.dim() == 3) {
    TORCH_CHECK(
        key.dim() == 3 && value.dim() == 3,
        fmt::format(
            "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found "
            "{}-D and {}-D tensors respectively",
            key.dim(),
            value.dim()));
    TORCH_CHECK(
        !key_padding_mask.defined() || key_padding_mask.dim() == 2,
        fmt::format(
            "For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but "
            "found {}-D tensor instead",
            key_padding_mask.dim()));
    TORCH_CHECK(
        !attn_mask.defined() || attn_mask.dim() == 2 || attn_mask.dim() == 3,
        fmt::format(
            "For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
            "found {}-D tensor instead",
            attn_mask.dim()));
    return true;
  }
  TORCH_CHECK(
      query.dim() == 2,
      fmt::format(
          "query should be unbatched 2D or batched 3D tensor but received {}-D query tensor",
          query.dim()));
  TORCH_CHECK(
      key.dim() == 2 && value.dim() == 2,
      fmt::format(
          "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found "
          "{}-D and {}-D tensors respectively",
          key.dim(),
          value.dim()));
  TORCH_CHECK(
      !key_padding_mask.defined() || key_padding_mask.dim() == 1,
      fmt::format(
          "For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D but "
          "found {}-D tensor instead",
          key_padding_mask.dim()));
  if (attn_mask.defined()) {
    TORCH_CHECK(
        attn_mask.dim() == 2 || attn_mask.dim() == 3,
        fmt::format(
            "For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
            "found {}-D tensor instead",
            attn_mask.dim()));
    if (attn_mask.dim() == 3) {
      const std::vector<int64_t> expected{num_heads, query.size(0), key.size(0)};
      TORCH_CHECK(
          attn_mask.sizes() == c10::IntArrayRef(expected),
          fmt::format(
              "Expected `attn_mask` shape to be {} but got {}",
              shape_str(expected),
              shape_str(attn_mask.sizes())));
    }
  }
  return false;
}

void check_attn_mask_shape(
    const Tensor& attn_mask,
    int64_t tgt_len,
    int64_t src_len,
    int64_t bsz_times_heads) {
  if (attn_mask.dim() == 2) {
    const std::vector<int64_t> correct{tgt_len, src_len};
    TORCH_CHECK(
        attn_mask.sizes() == c10::IntArrayRef(correct),
        fmt::format(
            "The shape of the 2D attn_mask is {}, but should be {}.",
            shape_str(attn_mask.sizes()),
            shape_str(correct)));
  } else if (attn_mask.dim() == 3) {
    const std::vector<int64_t> correct{bsz_times_heads, tgt_len, src_len};
    TORCH_CHECK(
        attn_mask.sizes() == c10::IntArrayRef(correct),
        fmt::format(
            "The shape of the 3D attn_mask is {}, but should be {}.",
            shape_str(attn_mask.sizes()),
            shape_str(correct)));
  } else {
    TORCH_CHECK(false, fmt::format("attn_mask's dimension {} is not supported", attn_mask.dim()));
  }
}

void check_key_padding_mask_shape(
    const Tensor& key_padding_mask,
    int64_t src_len,
    int64_t bsz) {
  TORCH_CHECK(
      key_padding_mask.size(0) == bsz,
      fmt::format(
          "Expected key_padded_mask.shape[0] to be {}, but got {}", bsz, key_padding_mask.size(0)));
  TORCH_CHECK(
      key_padding_mask.size(1) == src_len,
      fmt::format(
          "Expected key_padded_mask.shape[1] to be {}, but got {}",
          src_len,
          key_padding_mask.size(1)));
}

}  // namespace detail
}  // namespace mha
