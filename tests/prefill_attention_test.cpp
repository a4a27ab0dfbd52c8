// The prefill attention kernel (src/attention/prefill/): every capability
// this CPU runs against the same attention in float64, on q, k and v laid out
// as the sequence-first kernel reads them (strided views of one (L, N, 3, H,
// hd) projection), at served sizes (E = 512 and 768, up to 1,024 tokens) and
// ragged ones (rows and keys not multiples of a tile), cross-attention
// lengths; bitwise invariance to the thread count; a prepacked sequence-first
// MultiheadAttention(512, 8) takes it (float modules and masked calls keep
// SDPA) within float32 rounding of the float module; bad operands.

#include "attention/prefill/prefill_attention.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <mha/mha.h>
#include <torch/torch.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "support.h"
#include "tolerances.h"

namespace mha {
namespace {

using detail::CpuCapability;
using test::bitwise_equal;
using test::called;
using test::ops_called;
using test::tensors_close;
using torch::Tensor;

/// q (N, H, L, hd), k and v (N, H, S, hd): views of (length, N, 3, H, hd)
/// projections as the sequence-first kernel makes them (q from one, k and v from another).
std::tuple<Tensor, Tensor, Tensor> strided_qkv(
    int64_t n, int64_t heads, int64_t q_len, int64_t kv_len, int64_t hd) {
  const Tensor queries = torch::randn({q_len, n, 3, heads, hd});
  const Tensor keys = torch::randn({kv_len, n, 3, heads, hd});
  return {queries.select(2, 0).permute({1, 2, 0, 3}), keys.select(2, 1).permute({1, 2, 0, 3}),
          keys.select(2, 2).permute({1, 2, 0, 3})};
}

/// softmax(q k^T / sqrt(hd)) v in float64: (N, H, L, hd).
Tensor reference(const Tensor& q, const Tensor& k, const Tensor& v) {
  const Tensor scores =
      torch::matmul(q.to(torch::kDouble), k.to(torch::kDouble).transpose(-1, -2)) /
      std::sqrt(static_cast<double>(q.size(-1)));
  return torch::matmul(torch::softmax(scores, -1), v.to(torch::kDouble));
}

/// The kernel's output in an (L, N, H, hd) buffer, seen as (N, H, L, hd).
Tensor run(const Tensor& q, const Tensor& k, const Tensor& v, CpuCapability c) {
  const Tensor rows = torch::empty({q.size(2), q.size(0), q.size(1), q.size(3)});  // (L, N, H, hd)
  Tensor out = rows.permute({1, 2, 0, 3});                                         // (N, H, L, hd)
  detail::prefill_attention(q, k, v, out, c);
  return out;
}

TEST(PrefillAttentionKernel, EveryCapabilityMatchesAttentionInFloat64) {
  torch::manual_seed(0);
  // (N, H, L, S, hd): the design card's 16, 128 and 1,024 tokens at E = 512; BERT's
  // heads; ragged rows and keys; cross-attention lengths; one token.
  const std::vector<std::vector<int64_t>> shapes = {
      {1, 8, 16, 16, 64}, {2, 8, 128, 128, 64}, {1, 8, 1024, 1024, 64}, {2, 12, 128, 128, 64},
      {3, 4, 37, 37, 32}, {2, 2, 7, 50, 96},    {1, 2, 1, 1, 64},       {1, 3, 5, 33, 128}};
  for (const CpuCapability c : detail::available_cpu_capabilities()) {
    for (const auto& s : shapes) {
      const auto [q, k, v] = strided_qkv(s[0], s[1], s[2], s[3], s[4]);
      EXPECT_TRUE(detail::prefill_attention_takes(q, k, v)) << at::IntArrayRef(s);
      EXPECT_TRUE(tensors_close(run(q, k, v, c).to(torch::kDouble), reference(q, k, v), 1e-5, 1e-6))
          << detail::capability_name(c) << " " << at::IntArrayRef(s);
    }
  }
}

TEST(PrefillAttentionKernel, WithinFloat32RoundingOfSdpa) {
  torch::manual_seed(1);
  const auto [q, k, v] = strided_qkv(8, 8, 128, 128, 64);
  const Tensor expected = at::scaled_dot_product_attention(q, k, v);  // (N, H, L, hd)
  const auto tol = support::parity_tolerance(torch::kFloat);
  for (const CpuCapability c : detail::available_cpu_capabilities()) {
    EXPECT_TRUE(tensors_close(run(q, k, v, c), expected, tol.rtol, tol.atol))
        << detail::capability_name(c);
  }
}

TEST(PrefillAttentionKernel, TheThreadCountChangesNoBit) {
  torch::manual_seed(2);
  const auto [q, k, v] = strided_qkv(2, 8, 300, 300, 64);
  const int threads = at::get_num_threads();
  const CpuCapability best = detail::available_cpu_capabilities().back();
  at::set_num_threads(1);
  const Tensor one = run(q, k, v, best);
  at::set_num_threads(std::max(threads, 2));
  const Tensor many = run(q, k, v, best);
  at::set_num_threads(threads);
  EXPECT_TRUE(bitwise_equal(one, many));
}

TEST(PrefillAttentionKernel, BadOperandsThrowNamingThem) {
  const auto [q, k, v] = strided_qkv(1, 2, 4, 4, 48);  // hd not a multiple of 32
  EXPECT_FALSE(detail::prefill_attention_takes(q, k, v));
  Tensor out = torch::empty_like(q);
  EXPECT_THROW(detail::prefill_attention(q, k, v, out), c10::Error);
  const auto [q2, k2, v2] = strided_qkv(1, 2, 4, 4, 64);
  EXPECT_FALSE(detail::prefill_attention_takes(q2.to(torch::kDouble), k2, v2));
  Tensor wrong = torch::empty({1, 2, 5, 64});
  EXPECT_THROW(detail::prefill_attention(q2, k2, v2, wrong), c10::Error);
}

TEST(PrefillAttentionKernel, APrepackedSequenceFirstModuleTakesItWithinFloatRounding) {
  torch::manual_seed(3);
  MultiheadAttention attn(MultiheadAttentionOptions(512, 8));
  attn->eval();
  auto reference_module =
      MultiheadAttention(std::dynamic_pointer_cast<MultiheadAttentionImpl>(attn->clone()));
  prepack(attn);
  const auto tol = support::parity_tolerance(torch::kFloat);
  for (const auto& [len, batch] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {16, 1}, {128, 2}, {1024, 1}}) {
    const Tensor x = torch::randn({len, batch, 512});  // (L, N, E)
    const c10::InferenceMode inference;
    Tensor out;
    const auto ops = ops_called([&] { out = std::get<0>(attn->forward(x, x, x, {}, false)); });
    EXPECT_TRUE(called(ops, "mha::prefill_attention")) << len << " x " << batch;
    EXPECT_FALSE(called(ops, "aten::scaled_dot_product_attention")) << len << " x " << batch;
    Tensor expected;
    const auto float_ops =
        ops_called([&] { expected = std::get<0>(reference_module->forward(x, x, x, {}, false)); });
    EXPECT_FALSE(called(float_ops, "mha::prefill_attention")) << "a float module keeps SDPA";
    EXPECT_TRUE(tensors_close(out, expected, tol.rtol, tol.atol)) << len << " x " << batch;
  }
  const Tensor x = torch::randn({16, 2, 512});
  const Tensor padding =
      torch::zeros({2, 16}, torch::kBool).index_fill_(1, torch::tensor({15}), true);
  const c10::InferenceMode inference;
  const auto masked_ops = ops_called([&] { attn->forward(x, x, x, padding, false); });
  EXPECT_FALSE(called(masked_ops, "mha::prefill_attention")) << "a masked call keeps SDPA";
}

}  // namespace
}  // namespace mha
