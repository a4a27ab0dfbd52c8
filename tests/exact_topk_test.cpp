// detail::exact_topk (src/generation/exact_topk.h), the top-k of beam search
// and the top-k warper, against at::topk (Python's torch.topk) on the score
// rows decoding gives it: values and indices bit for bit, ties, NaN and
// -inf included (the tied entries chosen and their order are ATen's).

#include "generation/exact_topk.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

namespace {

using torch::Tensor;

/// The bits of `t` (NaN equal to the same NaN).
Tensor bits(const Tensor& t) {
  return t.scalar_type() == torch::kFloat64 ? t.contiguous().view(torch::kLong)
                                            : t.contiguous().view(torch::kInt);
}

void expect_as_topk(const Tensor& scores, int64_t k) {
  const auto [values, indices] = mha::detail::exact_topk(scores, k);
  const auto [want_values, want_indices] = at::topk(scores, k);
  EXPECT_TRUE(bits(values).equal(bits(want_values))) << "k=" << k << " shape " << scores.sizes();
  EXPECT_TRUE(indices.equal(want_indices)) << "k=" << k << " shape " << scores.sizes();
}

TEST(ExactTopk, BeamSearchRowsAreAtTopkBitForBit) {
  torch::manual_seed(0);
  // 16 inputs x 4 beams over a 32,000-token vocabulary, k = 2 beams.
  const Tensor scores = torch::randn({16, 4 * 32000}).log_softmax(-1);
  expect_as_topk(scores, 8);
  expect_as_topk(scores, 1);
  expect_as_topk(scores, 50);  // the top-k warper's default
  expect_as_topk(scores, 64);
  expect_as_topk(scores.t().contiguous().t(), 8);  // not contiguous
  expect_as_topk(scores.narrow(1, 0, 1003), 8);    // a tail shorter than a block
}

TEST(ExactTopk, TiesNanAndInfinityGiveAtTopksAnswer) {
  torch::manual_seed(1);
  // Few distinct values: ties inside and at the edge of the top k.
  expect_as_topk(torch::randint(0, 6, {8, 3000}).to(torch::kFloat), 8);
  Tensor masked = torch::randn({4, 3000});
  masked.index_put_({torch::indexing::Slice(), torch::indexing::Slice(10)},
                    -std::numeric_limits<float>::infinity());  // 10 finite per row
  expect_as_topk(masked, 8);
  expect_as_topk(masked, 12);  // -inf ties in the top k
  Tensor with_nan = torch::randn({4, 3000});
  with_nan[2][1234] = std::numeric_limits<float>::quiet_NaN();
  expect_as_topk(with_nan, 8);
}

TEST(ExactTopk, ManyTiesPickTheEntriesAtTopkPicks) {
  // ATen's partial sort keeps tied entries in an order of its heap's making;
  // these rows tie at every rank, at the edge of the top k, and among NaNs.
  for (int64_t seed = 0; seed < 40; ++seed) {
    torch::manual_seed(seed);
    const int64_t distinct = 2 + seed % 7;
    expect_as_topk(torch::randint(0, distinct, {6, 4000}).to(torch::kFloat), 1 + seed % 40);
  }
  torch::manual_seed(3);
  // Beams that repeat one another: their sums tie across the beams' blocks.
  const Tensor beam = torch::randn({16, 1, 32000}).log_softmax(-1);
  expect_as_topk((beam.repeat({1, 4, 1}) - 9.5f).reshape({16, -1}), 8);
  Tensor nans = torch::randint(0, 3, {4, 3000}).to(torch::kFloat);
  nans.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, 3000, 97)},
                  std::numeric_limits<float>::quiet_NaN());               // 31 NaNs per row
  expect_as_topk(nans, 8);                                                // more NaNs than k
  expect_as_topk(nans, 40);                                               // fewer NaNs than k
  expect_as_topk(torch::arange(5000, torch::kFloat).repeat({2, 1}), 16);  // every entry enters
}

TEST(ExactTopk, OtherInputsGoToAtTopk) {
  torch::manual_seed(2);
  expect_as_topk(torch::randn({3, 5}), 5);                     // k == M
  expect_as_topk(torch::randn({3, 500}), 65);                  // k above 64
  expect_as_topk(torch::randn({3, 500}), 8);                   // 64 k > M: nth_element
  expect_as_topk(torch::randn({3, 500}, torch::kFloat64), 8);  // float64
  expect_as_topk(torch::randn({2, 3, 500}).select(0, 1), 8);   // a view
}

}  // namespace
