// TensorParallelMultiheadAttention: the shard from a whole module, and the
// whole tensors gathered back one at a time (gather_full, save).

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <array>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "mha/tensor_parallel.h"
#include "tensor_parallel/collectives.h"
#include "tensor_parallel/plain_module.h"
#include "tensor_parallel/sharding.h"

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

/// Collective: hands each whole parameter of `m` (Python's name, whole
/// shape) to `use`, one at a time, each gathered from the ranks' shards by
/// an all-gather (in this order on every rank, the protocol a Python rank
/// follows in tests/tensor_parallel/tp_interop.py); `out_proj.bias` is
/// every rank's own. A gathered tensor lives until `use` returns, unless it
/// keeps it.
void for_each_whole(const TensorParallelMultiheadAttentionImpl& m,
                    const std::function<void(const std::string&, Tensor)>& use) {
  static const std::array<const char*, 9> kOrder{
      "in_proj_weight", "q_proj_weight",   "k_proj_weight", "v_proj_weight", "in_proj_bias",
      "out_proj.bias",  "out_proj.weight", "bias_k",        "bias_v"};
  const detail::Shard shard(m.options.embed_dim(), m.group->getRank(), m.group->getSize());
  const auto params = m.named_parameters();
  for (const std::string name : kOrder) {
    const Tensor* local = params.find(name);
    if (local == nullptr) continue;
    if (!detail::split_dim(name)) {
      use(name, local->detach());
      continue;
    }
    use(name, shard.whole_from(name, detail::all_gather(*m.group, local->detach(),
                                                        "the gather of the whole module")));
  }
}

}  // namespace

void TensorParallelMultiheadAttentionImpl::load_shard_from(const MultiheadAttentionImpl& whole) {
  check_same_options(options, whole.options);
  const detail::Shard shard(options.embed_dim(), group->getRank(), group->getSize());
  const auto from = whole.named_parameters();
  torch::NoGradGuard no_grad;
  for (auto& parameter : named_parameters()) {
    parameter.value().copy_(shard.of(parameter.key(), from[parameter.key()]));
  }
  validated_ = false;
}

MultiheadAttention TensorParallelMultiheadAttentionImpl::gather_full() const {
  MultiheadAttention whole(options);
  whole->to(out_proj->weight.scalar_type());
  auto targets = whole->named_parameters();
  torch::NoGradGuard no_grad;
  for_each_whole(*this, [&](const std::string& name, const Tensor& gathered) {
    targets[name].copy_(gathered);
  });
  return whole;
}

void TensorParallelMultiheadAttentionImpl::save(const std::string& path) const {
  const bool writes = group->getRank() == 0;
  std::map<std::string, Tensor> gathered;  // rank 0's; the others drop each one
  for_each_whole(*this, [&](const std::string& name, Tensor tensor) {
    if (writes) gathered.emplace(name, std::move(tensor));
  });
  if (!writes) return;
  std::vector<std::pair<std::string, Tensor>> tensors;  // in the module's state_dict order
  for (const auto& [name, local] : mha::state_dict(*this)) {
    tensors.emplace_back(name, gathered.at(name));
  }
  gathered.clear();
  save_state_dict(*detail::module_holding(tensors, name()), path);
}

}  // namespace mha
