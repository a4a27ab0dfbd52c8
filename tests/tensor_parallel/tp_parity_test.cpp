// Run by scripts/tp_run.sh on 2 (CI) or 4 ranks: every rank's output, weights
// and gradients against the single-process mha::MultiheadAttention on the same
// whole weights (itself checked against Python's nn.MultiheadAttention by the
// parity suite), within the parity tolerance.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mha/tensor_parallel.h"
#include "support.h"
#include "tolerances.h"
#include "tp_support.h"

namespace {

using mha::support::parity_tolerance;
using mha::test::tensors_close;
using mha::tp_test::group;
using torch::Tensor;

enum class Mask { kNone, kBool2d, kFloatPerHead, kKeyPadding, kCausal };

struct Case {
  explicit Case(std::string name_) : name(std::move(name_)) {}
  std::string name;
  int64_t embed_dim = 16, num_heads = 4;
  bool bias = true, batch_first = false, self_attention = true, unbatched = false;
  bool add_bias_kv = false, add_zero_attn = false, need_weights = true, average = true;
  std::optional<int64_t> kdim, vdim;
  Mask mask = Mask::kNone;
  torch::Dtype dtype = torch::kFloat32;

  mha::MultiheadAttentionOptions options() const {
    return mha::MultiheadAttentionOptions(embed_dim, num_heads)
        .bias(bias)
        .batch_first(batch_first)
        .add_bias_kv(add_bias_kv)
        .add_zero_attn(add_zero_attn)
        .kdim(kdim)
        .vdim(vdim);
  }
};

std::vector<Case> cases() {
  std::vector<Case> all;
  all.push_back(Case("self_float32"));
  Case c("self_float64");
  c.dtype = torch::kFloat64;
  all.push_back(c);
  c = Case("self_no_bias_batch_first_bool_mask");
  c.bias = false, c.batch_first = true, c.mask = Mask::kBool2d;
  all.push_back(c);
  c = Case("cross_kdim_vdim_per_head_mask_per_head_weights");
  c.self_attention = false, c.kdim = 6, c.vdim = 10, c.mask = Mask::kFloatPerHead,
  c.average = false;
  all.push_back(c);
  c = Case("cross_key_padding_bias_kv_zero_attn_float64");
  c.self_attention = false, c.mask = Mask::kKeyPadding, c.add_bias_kv = true;
  c.add_zero_attn = true, c.dtype = torch::kFloat64;
  all.push_back(c);
  c = Case("self_causal_no_weights");
  c.mask = Mask::kCausal, c.need_weights = false;
  all.push_back(c);
  c = Case("self_causal_with_weights_batch_first");
  c.mask = Mask::kCausal, c.batch_first = true;
  all.push_back(c);
  c = Case("unbatched_cross_per_head_mask");
  c.unbatched = true, c.self_attention = false, c.mask = Mask::kFloatPerHead;
  all.push_back(c);
  return all;
}

struct Inputs {
  Tensor query, key, value, key_padding_mask, attn_mask;
};

/// Same on every rank: drawn after the same seed.
Inputs make_inputs(const Case& c) {
  const int64_t L = 5, S = c.self_attention ? 5 : 7, N = 3, E = c.embed_dim;
  const auto opts = torch::TensorOptions().dtype(c.dtype);
  auto shape = [&](int64_t len, int64_t features) -> std::vector<int64_t> {
    if (c.unbatched) return {len, features};
    return c.batch_first ? std::vector<int64_t>{N, len, features}
                         : std::vector<int64_t>{len, N, features};
  };
  Inputs in;
  in.query = torch::randn(shape(L, E), opts);
  in.key = c.self_attention ? in.query : torch::randn(shape(S, c.kdim.value_or(E)), opts);
  in.value = c.self_attention ? in.query : torch::randn(shape(S, c.vdim.value_or(E)), opts);
  const int64_t batch = c.unbatched ? 1 : N;
  switch (c.mask) {
    case Mask::kBool2d:
      in.attn_mask = torch::rand({L, S}) > 0.7;
      in.attn_mask.select(1, 0).fill_(false);  // no fully masked row
      break;
    case Mask::kFloatPerHead:
      in.attn_mask = torch::randn({batch * c.num_heads, L, S}, opts);
      break;
    case Mask::kKeyPadding:
      in.key_padding_mask = torch::zeros({N, S}, torch::kBool);
      in.key_padding_mask.select(1, S - 1).fill_(true);
      break;
    case Mask::kCausal:
      in.attn_mask = torch::ones({L, S}, torch::kBool).triu(1);
      break;
    case Mask::kNone:
      break;
  }
  return in;
}

/// Leaf copies of the inputs that keep self-attention's identity.
Inputs leaf_copies(const Inputs& in) {
  Inputs out = in;
  out.query = in.query.detach().clone().requires_grad_();
  out.key = in.key.is_same(in.query) ? out.query : in.key.detach().clone().requires_grad_();
  out.value = in.value.is_same(in.query) ? out.query : in.value.detach().clone().requires_grad_();
  return out;
}

template <typename Module>
std::tuple<Tensor, Tensor> run(Module& m, const Inputs& in, const Case& c) {
  return m(in.query, in.key, in.value, in.key_padding_mask, c.need_weights, in.attn_mask, c.average,
           c.mask == Mask::kCausal);
}

void expect_close(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.defined(), expected.defined()) << what;
  if (!expected.defined()) return;
  const auto tol = parity_tolerance(expected.scalar_type());
  EXPECT_TRUE(tensors_close(actual, expected, tol.rtol, tol.atol))
      << what << " on rank " << group()->getRank();
}

class TensorParallelParity : public ::testing::TestWithParam<Case> {};

TEST_P(TensorParallelParity, OutputsWeightsAndGradientsMatchOneProcess) {
  const Case& c = GetParam();
  torch::manual_seed(7);  // the same whole weights and inputs on every rank
  mha::MultiheadAttention whole(c.options());
  whole->to(c.dtype);
  mha::TensorParallelMultiheadAttention tp(c.options(), group());
  tp->to(c.dtype);
  tp->load_shard_from(*whole);
  const Inputs in = make_inputs(c);

  {  // inference: eval mode, no autograd (the single process may take its fast path)
    torch::NoGradGuard no_grad;
    whole->eval();
    tp->eval();
    const auto [out_w, weights_w] = run(whole, in, c);
    const auto [out_t, weights_t] = run(tp, in, c);
    expect_close(out_t, out_w, "inference output");
    expect_close(weights_t, weights_w, "inference weights");
  }
  whole->train();
  tp->train();
  const Inputs in_w = leaf_copies(in), in_t = leaf_copies(in);
  const auto [out_w, weights_w] = run(whole, in_w, c);
  const auto [out_t, weights_t] = run(tp, in_t, c);
  expect_close(out_t, out_w, "training output");
  expect_close(weights_t, weights_w, "training weights");
  const Tensor grad_out = torch::randn_like(out_w);
  Tensor loss_w = (out_w * grad_out).sum(), loss_t = (out_t * grad_out).sum();
  if (weights_w.defined()) {
    const Tensor grad_weights = torch::randn_like(weights_w);
    loss_w = loss_w + (weights_w * grad_weights).sum();
    loss_t = loss_t + (weights_t * grad_weights).sum();
  }
  loss_w.backward();
  loss_t.backward();
  expect_close(in_t.query.grad(), in_w.query.grad(), "query gradient");
  if (!c.self_attention) {
    expect_close(in_t.key.grad(), in_w.key.grad(), "key gradient");
    expect_close(in_t.value.grad(), in_w.value.grad(), "value gradient");
  }
  // Each rank's parameter gradients: its slices of the single-process ones.
  mha::MultiheadAttention whole_grads(c.options());
  whole_grads->to(c.dtype);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : whole_grads->named_parameters()) {
      p.value().copy_(whole->named_parameters()[p.key()].grad());
    }
  }
  mha::TensorParallelMultiheadAttention expected(c.options(), group());
  expected->to(c.dtype);
  expected->load_shard_from(*whole_grads);
  for (const auto& p : tp->named_parameters()) {
    expect_close(p.value().grad(), expected->named_parameters()[p.key()], p.key() + " gradient");
  }
  const int64_t width = c.embed_dim / group()->getSize();  // out_proj's input columns, directly
  expect_close(tp->out_proj->weight.grad(),
               whole->out_proj->weight.grad().narrow(1, width * group()->getRank(), width),
               "out_proj.weight gradient (columns)");
}

INSTANTIATE_TEST_SUITE_P(Cases,
                         TensorParallelParity,
                         ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
