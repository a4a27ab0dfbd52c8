#include "transformer/input_checks.h"

#include <fmt/format.h>

#include <vector>

#include "shape_format.h"

namespace mha {
namespace detail {

SequenceShape check_sequence(const torch::Tensor& x,
                             const char* name,
                             int64_t d_model,
                             bool batch_first) {
  TORCH_CHECK(x.defined(), fmt::format("{} must be a defined tensor", name));
  TORCH_CHECK(x.dim() == 2 || x.dim() == 3,
              fmt::format("{} must be unbatched 2-D or batched 3-D, but got a {}-D tensor of "
                          "shape {}",
                          name, x.dim(), torch_size(x.sizes())));
  TORCH_CHECK(x.size(-1) == d_model,
              fmt::format("{} must have d_model={} features in its last dimension, but got "
                          "shape {}",
                          name, d_model, torch_size(x.sizes())));
  if (x.dim() == 2) {
    return {std::nullopt, x.size(0)};  // (L, E)
  }
  return batch_first ? SequenceShape{x.size(0), x.size(1)}   // (N, L, E)
                     : SequenceShape{x.size(1), x.size(0)};  // (L, N, E)
}

void check_same_batch(const SequenceShape& t, const SequenceShape& s, const torch::Tensor& memory) {
  TORCH_CHECK(t.batch.has_value() == s.batch.has_value(),
              fmt::format("memory must be {} as tgt is, but got a {}-D tensor",
                          t.batch ? "batched (3-D)" : "unbatched (2-D)", memory.dim()));
  TORCH_CHECK(t.batch == s.batch, fmt::format("memory must have tgt's batch size {}, but got {}",
                                              t.batch.value_or(0), s.batch.value_or(0)));
}

void check_attention_mask(const torch::Tensor& mask,
                          const char* name,
                          const SequenceShape& query,
                          int64_t keys,
                          int64_t nhead) {
  if (!mask.defined()) return;
  const std::vector<int64_t> two_d{query.length, keys};
  const std::vector<int64_t> three_d{query.batch.value_or(1) * nhead, query.length, keys};
  const bool ok = (mask.dim() == 2 && mask.sizes() == c10::IntArrayRef(two_d)) ||
                  (mask.dim() == 3 && mask.sizes() == c10::IntArrayRef(three_d));
  TORCH_CHECK(ok, fmt::format("{} must have shape {} or {}, but got {}", name, python_tuple(two_d),
                              python_tuple(three_d), torch_size(mask.sizes())));
}

void check_padding_mask(const torch::Tensor& mask, const char* name, const SequenceShape& keys) {
  if (!mask.defined()) return;
  const std::vector<int64_t> expected = keys.batch ? std::vector<int64_t>{*keys.batch, keys.length}
                                                   // (N, S)
                                                   : std::vector<int64_t>{keys.length};  // (S)
  TORCH_CHECK(mask.sizes() == c10::IntArrayRef(expected),
              fmt::format("{} must have shape {}, but got {}", name, python_tuple(expected),
                          torch_size(mask.sizes())));
}

}  // namespace detail
}  // namespace mha
