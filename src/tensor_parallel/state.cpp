// TensorParallelMultiheadAttention: the shard from a whole module or a whole
// checkpoint, and the whole module gathered back (for saving).

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <string>

#include "collectives.h"
#include "mha/tensor_parallel.h"
#include "shape_format.h"
#include "sharding.h"

namespace mha {

using torch::Tensor;

namespace {

/// `whole`'s options must be `options`: the shard is sliced from its shapes.
void check_same_options(const MultiheadAttentionOptions& mine,
                        const MultiheadAttentionOptions& theirs) {
  const auto describe = [](const MultiheadAttentionOptions& o) {
    return fmt::format("embed_dim={}, num_heads={}, bias={}, add_bias_kv={}, kdim={}, vdim={}",
                       o.embed_dim(), o.num_heads(), o.bias(), o.add_bias_kv(),
                       o.kdim().value_or(o.embed_dim()), o.vdim().value_or(o.embed_dim()));
  };
  TORCH_CHECK_VALUE(describe(mine) == describe(theirs),
                    fmt::format("load_shard_from: expected a module with {}, but got one with {}",
                                describe(mine), describe(theirs)));
}

}  // namespace

void TensorParallelMultiheadAttentionImpl::load_shard_from(const MultiheadAttentionImpl& whole) {
  check_same_options(options, whole.options);
  const detail::Shard shard(options.embed_dim(), group->getRank(), group->getSize());
  torch::NoGradGuard no_grad;
  const auto copy = [](Tensor& to, const Tensor& from) {
    if (to.defined()) to.copy_(from);
  };
  copy(in_proj_weight, in_proj_weight.defined() ? shard.of_packed(whole.in_proj_weight) : Tensor());
  copy(q_proj_weight, q_proj_weight.defined() ? shard.of(whole.q_proj_weight, 0) : Tensor());
  copy(k_proj_weight, k_proj_weight.defined() ? shard.of(whole.k_proj_weight, 0) : Tensor());
  copy(v_proj_weight, v_proj_weight.defined() ? shard.of(whole.v_proj_weight, 0) : Tensor());
  copy(in_proj_bias, in_proj_bias.defined() ? shard.of_packed(whole.in_proj_bias) : Tensor());
  copy(out_proj->weight, shard.of(whole.out_proj->weight, 1));
  copy(out_proj->bias, whole.out_proj->bias);
  copy(bias_k, bias_k.defined() ? shard.of(whole.bias_k, 2) : Tensor());
  copy(bias_v, bias_v.defined() ? shard.of(whole.bias_v, 2) : Tensor());
  validated_ = false;
}

MultiheadAttention TensorParallelMultiheadAttentionImpl::gather_full() const {
  const detail::Shard shard(options.embed_dim(), group->getRank(), group->getSize());
  const auto gather = [this](const Tensor& local, int64_t dim) {
    return detail::all_gather_cat(*group, local.detach(), dim, "the gather of the whole module");
  };
  MultiheadAttention whole(options);
  whole->to(out_proj->weight.scalar_type());
  torch::NoGradGuard no_grad;
  if (in_proj_weight.defined()) {
    whole->in_proj_weight.copy_(shard.whole_packed(gather(in_proj_weight, 0)));
  } else {
    whole->q_proj_weight.copy_(gather(q_proj_weight, 0));
    whole->k_proj_weight.copy_(gather(k_proj_weight, 0));
    whole->v_proj_weight.copy_(gather(v_proj_weight, 0));
  }
  if (in_proj_bias.defined()) {
    whole->in_proj_bias.copy_(shard.whole_packed(gather(in_proj_bias, 0)));
    whole->out_proj->bias.copy_(out_proj->bias);
  }
  whole->out_proj->weight.copy_(gather(out_proj->weight, 1));
  if (bias_k.defined()) {
    whole->bias_k.copy_(gather(bias_k, 2));
    whole->bias_v.copy_(gather(bias_v, 2));
  }
  return whole;
}

LoadResult TensorParallelMultiheadAttentionImpl::load(const std::string& path,
                                                      const LoadOptions& load_options) {
  MultiheadAttention whole(options);
  whole->to(out_proj->weight.scalar_type());
  LoadResult result = load_state_dict(*whole, path, load_options);
  load_shard_from(*whole);
  return result;
}

void TensorParallelMultiheadAttentionImpl::save(const std::string& path) const {
  const MultiheadAttention whole = gather_full();
  if (group->getRank() == 0) {
    save_state_dict(*whole, path);
  }
}

}  // namespace mha
