#include "attention/input_checks.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <utility>
#include <vector>

#include "common/shape_format.h"

namespace mha {
namespace detail {

using torch::Tensor;

void check_dtype_and_device(const Tensor& parameter, const Tensor& t, const char* name) {
  // A RuntimeError, as Python's ("mat1 and mat2 must have the same dtype").
  TORCH_CHECK(
      t.scalar_type() == parameter.scalar_type(),
      fmt::format("expected {} to have the parameters' dtype {}, but got {}; convert the input "
                  "or call module->to(dtype)",
                  name, c10::toString(parameter.scalar_type()), c10::toString(t.scalar_type())));
  TORCH_CHECK(t.device() == parameter.device(),
              fmt::format("expected {} on the parameters' device {}, but got {}; move the input or "
                          "call module->to(device)",
                          name, parameter.device().str(), t.device().str()));
}

void check_mask_device(const Tensor& mask,
                       const char* name,
                       const Tensor& input,
                       const char* input_name) {
  TORCH_CHECK(!mask.defined() || mask.device() == input.device(),
              fmt::format("expected {} on the {}'s device {}, but got {}", name, input_name,
                          input.device().str(), mask.device().str()));
}

void check_dtypes_and_devices(const Tensor& parameter, const AttentionCall& call) {
  for (const auto& [t, name] : {std::pair<const Tensor&, const char*>{call.query, "query"},
                                std::pair<const Tensor&, const char*>{call.key, "key"},
                                std::pair<const Tensor&, const char*>{call.value, "value"}}) {
    if (t.defined()) {  // not a filled static cache's key and value
      check_dtype_and_device(parameter, t, name);
    }
  }
  check_mask_device(call.key_padding_mask, "key_padding_mask", call.query, "query");
  check_mask_device(call.attn_mask, "attn_mask", call.query, "query");
}

void check_feature_sizes(const MultiheadAttentionOptions& options,
                         const Tensor& query,
                         const Tensor& key,
                         const Tensor& value) {
  const int64_t embed_dim = options.embed_dim();
  const int64_t kdim = options.kdim().value_or(embed_dim);
  const int64_t vdim = options.vdim().value_or(embed_dim);
  check_embed_dim(query.size(-1), embed_dim);
  TORCH_CHECK(!key.defined() || key.size(-1) == kdim,
              fmt::format("expected key feature size (kdim) {}, but got {}", kdim, key.size(-1)));
  TORCH_CHECK(
      !value.defined() || value.size(-1) == vdim,
      fmt::format("expected value feature size (vdim) {}, but got {}", vdim, value.size(-1)));
}

namespace {

/// Python's rank checks of `_mha_shape_check` for a query of `query_dim`
/// dimensions (3 batched, 2 unbatched), in its wording.
void check_ranks(int64_t query_dim,
                 const Tensor& key,
                 const Tensor& value,
                 const Tensor& key_padding_mask,
                 const Tensor& attn_mask) {
  const char* kind = query_dim == 3 ? "batched (3-D)" : "unbatched (2-D)";
  TORCH_CHECK(key.dim() == query_dim && value.dim() == query_dim,
              fmt::format("For {} `query`, expected `key` and `value` to be {}-D but found {}-D "
                          "and {}-D tensors respectively",
                          kind, query_dim, key.dim(), value.dim()));
  TORCH_CHECK(!key_padding_mask.defined() || key_padding_mask.dim() == query_dim - 1,
              fmt::format("For {} `query`, expected `key_padding_mask` to be `None` or {}-D but "
                          "found {}-D tensor instead",
                          kind, query_dim - 1, key_padding_mask.dim()));
  TORCH_CHECK(!attn_mask.defined() || attn_mask.dim() == 2 || attn_mask.dim() == 3,
              fmt::format("For {} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
                          "found {}-D tensor instead",
                          kind, attn_mask.dim()));
}

}  // namespace

bool mha_shape_check(const Tensor& query,
                     const Tensor& key,
                     const Tensor& value,
                     const Tensor& key_padding_mask,
                     const Tensor& attn_mask,
                     int64_t num_heads) {
  TORCH_CHECK(
      query.dim() == 2 || query.dim() == 3,
      fmt::format(
          "query should be unbatched 2D or batched 3D tensor but received {}-D query tensor",
          query.dim()));
  check_ranks(query.dim(), key, value, key_padding_mask, attn_mask);
  if (query.dim() == 3) return true;
  if (attn_mask.defined() && attn_mask.dim() == 3) {  // unbatched: (H, L, S)
    const std::vector<int64_t> expected{num_heads, query.size(0), key.size(0)};
    TORCH_CHECK(attn_mask.sizes() == c10::IntArrayRef(expected),
                fmt::format("Expected `attn_mask` shape to be {} but got {}",
                            python_tuple(expected), torch_size(attn_mask.sizes())));
  }
  return false;
}

void check_attn_mask_shape(const Tensor& attn_mask,
                           int64_t tgt_len,
                           int64_t src_len,
                           int64_t bsz_times_heads) {
  if (attn_mask.dim() == 2) {
    const std::vector<int64_t> correct{tgt_len, src_len};
    TORCH_CHECK(attn_mask.sizes() == c10::IntArrayRef(correct),
                fmt::format("The shape of the 2D attn_mask is {}, but should be {}.",
                            torch_size(attn_mask.sizes()), python_tuple(correct)));
  } else if (attn_mask.dim() == 3) {
    const std::vector<int64_t> correct{bsz_times_heads, tgt_len, src_len};
    TORCH_CHECK(attn_mask.sizes() == c10::IntArrayRef(correct),
                fmt::format("The shape of the 3D attn_mask is {}, but should be {}.",
                            torch_size(attn_mask.sizes()), python_tuple(correct)));
  } else {
    TORCH_CHECK(false, fmt::format("attn_mask's dimension {} is not supported", attn_mask.dim()));
  }
}

void check_key_padding_mask_shape(const Tensor& key_padding_mask, int64_t src_len, int64_t bsz) {
  TORCH_CHECK(key_padding_mask.size(0) == bsz,
              fmt::format("Expected key_padded_mask.shape[0] to be {}, but got {}", bsz,
                          key_padding_mask.size(0)));
  TORCH_CHECK(key_padding_mask.size(1) == src_len,
              fmt::format("Expected key_padded_mask.shape[1] to be {}, but got {}", src_len,
                          key_padding_mask.size(1)));
}

void check_embed_dim(int64_t actual, int64_t expected) {
  TORCH_CHECK(actual == expected,
              fmt::format("was expecting embedding dimension of {}, but got {}", expected, actual));
}

void check_defined(const Tensor& query, const Tensor& key, const Tensor& value) {
  for (const auto& [t, name] : {std::pair<const Tensor&, const char*>{query, "query"},
                                std::pair<const Tensor&, const char*>{key, "key"},
                                std::pair<const Tensor&, const char*>{value, "value"}}) {
    TORCH_CHECK(t.defined(),
                fmt::format("expected {} to be a defined tensor, but got an undefined one", name));
  }
}

void check_module_inputs(const MultiheadAttentionOptions& options,
                         const Tensor& parameter,
                         const AttentionCall& call,
                         bool check_attn_mask_shape) {
  const Tensor &query = call.query, &key = call.key, &value = call.value;
  const Tensor &key_padding_mask = call.key_padding_mask, &attn_mask = call.attn_mask;
  check_defined(query, key, value);
  const bool is_batched =
      mha_shape_check(query, key, value, key_padding_mask, attn_mask, options.num_heads());
  check_dtypes_and_devices(parameter, call);
  check_feature_sizes(options, query, key, value);

  // Sequence-first view of the sizes: L, N, S.
  const bool batch_first = is_batched && options.batch_first();
  const int64_t seq_dim = batch_first ? 1 : 0, batch_dim = batch_first ? 0 : 1;
  const int64_t tgt_len = query.size(seq_dim), src_len = key.size(seq_dim);
  const int64_t bsz = is_batched ? query.size(batch_dim) : 1;
  if (is_batched) {
    const int64_t key_bsz = key.size(batch_dim), value_bsz = value.size(batch_dim);
    TORCH_CHECK(key_bsz == bsz && value_bsz == bsz,
                fmt::format("expected key and value batch size {} (the query's), but got key {} "
                            "and value {}",
                            bsz, key_bsz, value_bsz));
  }
  TORCH_CHECK(value.size(seq_dim) == src_len,
              fmt::format("expected value sequence length {} (the key's), but got {}", src_len,
                          value.size(seq_dim)));
  if (attn_mask.defined() && check_attn_mask_shape) {
    detail::check_attn_mask_shape(attn_mask, tgt_len, src_len, bsz * options.num_heads());
  }
  if (key_padding_mask.defined()) {
    // Unbatched (S) is checked as Python does, after its unsqueeze to (1, S).
    check_key_padding_mask_shape(is_batched ? key_padding_mask : key_padding_mask.unsqueeze(0),
                                 src_len, bsz);
  }
}

}  // namespace detail
}  // namespace mha
