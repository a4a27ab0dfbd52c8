// Self-attention of packed sequences (module/packed_self_attention.h).

#include "module/packed_self_attention.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <tuple>

#include "attention/call_plan.h"
#include "attention/run_stored_plan.h"
#include "common/shape_format.h"
#include "mha/multihead_attention.h"
#include "module/paged_call_checks.h"

namespace mha {
namespace detail {

using torch::Tensor;

std::vector<int64_t> checked_packed_offsets(const MultiheadAttentionImpl& module,
                                            const Tensor& x,
                                            const Tensor& cu_seqlens,
                                            const char* caller) {
  TORCH_CHECK(!module.is_training(), caller,
              " is for inference, but the module is in training mode; call eval()");
  TORCH_CHECK(!module.bias_k.defined() && !module.options.add_zero_attn(), caller,
              " supports neither add_bias_kv nor add_zero_attn");
  const int64_t features = module.options.embed_dim();
  TORCH_CHECK_VALUE(x.defined() && x.dim() == 2 && x.size(1) == features,
                    fmt::format("expected src of shape (rows, {}): the sequences' rows one after "
                                "another, but got {}",
                                features, x.defined() ? torch_size(x.sizes()) : "none"));
  TORCH_CHECK_VALUE(cu_seqlens.defined() && cu_seqlens.dim() == 1 && cu_seqlens.size(0) >= 1,
                    fmt::format("expected cu_seqlens of shape (num_seqs + 1): where each "
                                "sequence's rows start, then the rows' count, but got {}",
                                cu_seqlens.defined() ? torch_size(cu_seqlens.sizes()) : "none"));
  return checked_host_offsets(cu_seqlens, "cu_seqlens", static_cast<size_t>(cu_seqlens.size(0) - 1),
                              x.size(0));
}

Tensor packed_self_attention(const MultiheadAttentionImpl& module,
                             const Tensor& x,
                             const std::vector<int64_t>& offsets) {
  StoredCall call;
  call.layout = KeyValueLayout::kPacked;
  call.dtype = x.scalar_type();
  call.device = x.device();
  call.num_heads = module.options.num_heads();
  call.query_offsets = &offsets;
  return std::get<0>(run_stored_plan(plan_stored_call(call), call, AttentionWeights::of(module), x,
                                     x, x,
                                     /*store=*/nullptr));  // (T, E)
}

}  // namespace detail
}  // namespace mha
