// Self-attention of packed sequences (module/packed_self_attention.h).

#include "module/packed_self_attention.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <tuple>

#include "attention/key_value_source.h"
#include "attention/run_plan.h"
#include "common/shape_format.h"
#include "mha/multihead_attention.h"
#include "module/paged_call_checks.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

/// The packed sequences as a call's key/value source: nothing stored, each
/// sequence's queries over its own keys and values.
class PackedSequencesSource final : public KeyValueSource {
 public:
  PackedSequencesSource(const std::vector<int64_t>& offsets, int64_t heads)
      : offsets_(offsets), heads_(heads) {}

  std::tuple<Tensor, Tensor> attend(const Tensor& q_rows,
                                    const Tensor& k_rows,
                                    const Tensor& v_rows) override {
    Tensor out = at::empty_like(q_rows);  // (T, E')
    for (size_t i = 0; i + 1 < offsets_.size(); ++i) {
      const int64_t begin = offsets_[i], length = offsets_[i + 1] - begin;
      if (length == 0) continue;
      // (L, E') -> (1, H, L, hd)
      auto heads = [&](const Tensor& rows) {
        return rows.narrow(0, begin, length)
            .unflatten(-1, {heads_, -1})
            .transpose(0, 1)
            .unsqueeze(0);
      };
      const Tensor seq_out = std::get<0>(
          attend_over_keys(heads(q_rows), heads(k_rows), heads(v_rows), Tensor(), false));
      out.narrow(0, begin, length).copy_(seq_out.squeeze(0).transpose(0, 1).flatten(1));  // (L, E')
    }
    return {out, Tensor()};
  }

 private:
  const std::vector<int64_t>& offsets_;
  int64_t heads_;
};

}  // namespace

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
  PackedSequencesSource source(offsets, module.options.num_heads());
  return std::get<0>(attend_through_source(module, x, x, x, source));  // (T, E)
}

}  // namespace detail
}  // namespace mha
