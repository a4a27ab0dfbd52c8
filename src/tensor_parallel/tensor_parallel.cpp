// TensorParallelMultiheadAttention: construction, registration of the shard,
// printing, and the collective check of the first forward.

#include "mha/tensor_parallel.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "attention/input_checks.h"
#include "common/generator_state.h"
#include "common/shape_format.h"
#include "tensor_parallel/collectives.h"
#include "tensor_parallel/shard_init.h"
#include "tensor_parallel/sharding.h"

namespace mha {

using torch::Tensor;

TensorParallelMultiheadAttentionImpl::TensorParallelMultiheadAttentionImpl(
    const MultiheadAttentionOptions& options_,
    c10::intrusive_ptr<c10d::Backend> group_,
    const TensorParallelOptions& parallel_options_)
    : torch::nn::Cloneable<TensorParallelMultiheadAttentionImpl>(
          "mha::TensorParallelMultiheadAttention"),
      options(options_),
      group(std::move(group_)),
      parallel_options(parallel_options_) {
  reset();
}

void TensorParallelMultiheadAttentionImpl::reset() {
  TORCH_CHECK_VALUE(group, "TensorParallelMultiheadAttention: group must not be null");
  options.validate();
  const int world_size = group->getSize();
  TORCH_CHECK_VALUE(options.num_heads() % world_size == 0,
                    fmt::format("TensorParallelMultiheadAttention: num_heads ({}) must be "
                                "divisible by the group's world size ({})",
                                options.num_heads(), world_size));
  // Python's names and order, this rank's shapes.
  const detail::Shard shard(options.embed_dim(), group->getRank(), world_size);
  const int64_t E = options.embed_dim(), w = shard.width;
  const int64_t kdim = options.kdim().value_or(E), vdim = options.vdim().value_or(E);
  const bool packed = kdim == E && vdim == E;
  const auto local = [&](const std::string& name, std::vector<int64_t> sizes, bool defined) {
    return register_parameter(name, defined ? torch::empty(sizes) : Tensor(), defined);
  };
  q_proj_weight = local("q_proj_weight", {w, E}, !packed);
  k_proj_weight = local("k_proj_weight", {w, kdim}, !packed);
  v_proj_weight = local("v_proj_weight", {w, vdim}, !packed);
  in_proj_weight = local("in_proj_weight", {3 * w, E}, packed);
  in_proj_bias = local("in_proj_bias", {3 * w}, options.bias());
  {
    const detail::NoDrawsGuard no_draws;  // Linear's own init is overwritten
    out_proj = register_module(
        "out_proj", torch::nn::Linear(torch::nn::LinearOptions(w, E).bias(options.bias())));
  }
  bias_k = local("bias_k", {1, 1, w}, options.add_bias_kv());
  bias_v = local("bias_v", {1, 1, w}, options.add_bias_kv());
  detail::init_shard(*this, shard, parallel_options.exact_init());
  validated_ = false;
}

void TensorParallelMultiheadAttentionImpl::pretty_print(std::ostream& stream) const {
  stream << fmt::format(
      "mha::TensorParallelMultiheadAttention(embed_dim={}, num_heads={}, rank={}, world_size={}",
      options.embed_dim(), options.num_heads(), group->getRank(), group->getSize());
  if (options.dropout() != 0.0) stream << fmt::format(", dropout={}", options.dropout());
  if (!options.bias()) stream << ", bias=false";
  if (options.add_bias_kv()) stream << ", add_bias_kv=true";
  if (options.add_zero_attn()) stream << ", add_zero_attn=true";
  if (options.kdim()) stream << fmt::format(", kdim={}", *options.kdim());
  if (options.vdim()) stream << fmt::format(", vdim={}", *options.vdim());
  if (options.batch_first()) stream << ", batch_first=true";
  stream << ")";
}

namespace {

/// What every rank must agree on, in the order of `kFields`.
constexpr std::array<const char*, 10> kFields{
    "world_size", "embed_dim",   "num_heads",     "kdim",        "vdim",
    "bias",       "add_bias_kv", "add_zero_attn", "batch_first", "dtype"};

/// This rank's shard problems ("" when every parameter has its shard shape).
std::string shard_shape_problems(const TensorParallelMultiheadAttentionImpl& m) {
  const auto& o = m.options;
  const int64_t E = o.embed_dim(), w = E / m.group->getSize();
  const bool packed = o.kdim().value_or(E) == E && o.vdim().value_or(E) == E;
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected{{"out_proj.weight", {E, w}}};
  if (packed) {
    expected.push_back({"in_proj_weight", {3 * w, E}});
  } else {
    expected.push_back({"q_proj_weight", {w, E}});
    expected.push_back({"k_proj_weight", {w, o.kdim().value_or(E)}});
    expected.push_back({"v_proj_weight", {w, o.vdim().value_or(E)}});
  }
  if (o.bias()) {
    expected.push_back({"in_proj_bias", {3 * w}});
    expected.push_back({"out_proj.bias", {E}});
  }
  if (o.add_bias_kv()) {
    expected.push_back({"bias_k", {1, 1, w}});
    expected.push_back({"bias_v", {1, 1, w}});
  }
  const auto params = m.named_parameters();
  std::string problems;
  for (const auto& [name, shape] : expected) {
    const Tensor* t = params.find(name);
    if (t == nullptr || !t->defined() || t->sizes() != c10::IntArrayRef(shape)) {
      problems += fmt::format(
          "{}{} has shape {} but its shard shape is {}", problems.empty() ? "" : "; ", name,
          t && t->defined() ? detail::torch_size(t->sizes()) : "None", detail::python_tuple(shape));
    }
  }
  return problems;
}

}  // namespace

void TensorParallelMultiheadAttentionImpl::validate_across_ranks() {
  if (validated_) return;
  const auto& o = options;
  const int64_t E = o.embed_dim();
  const std::string problems = shard_shape_problems(*this);
  const std::vector<int64_t> mine{
      group->getSize(),        E,
      o.num_heads(),           o.kdim().value_or(E),
      o.vdim().value_or(E),    o.bias(),
      o.add_bias_kv(),         o.add_zero_attn(),
      o.batch_first(),         static_cast<int64_t>(out_proj->weight.scalar_type()),
      problems.empty() ? 0 : 1};
  const Tensor all = detail::all_gather_cat(*group, torch::tensor(mine), 0,
                                            "the collective check of the first forward")
                         .view({group->getSize(), -1});  // (p, fields + 1)
  const auto at = all.accessor<int64_t, 2>();
  for (int r = 0; r < group->getSize(); ++r) {
    for (size_t f = 0; f < kFields.size(); ++f) {
      TORCH_CHECK(at[r][f] == at[0][f],
                  fmt::format("TensorParallelMultiheadAttention: rank {} has {}={} but rank 0 has "
                              "{}={}: every rank must build the module with the same group size, "
                              "options and dtype",
                              r, kFields[f], at[r][f], kFields[f], at[0][f]));
    }
    TORCH_CHECK(at[r][kFields.size()] == 0,
                fmt::format("TensorParallelMultiheadAttention: rank {}'s parameters do not have "
                            "their shard shapes: {}",
                            r, r == group->getRank() ? problems : "see that rank's error"));
  }
  validated_ = true;
}

}  // namespace mha
