// Bad input: every invalid construction or call raises c10::Error naming the
// argument with expected versus actual (Python's wording where Python has one),
// and a failed call leaves the module's parameters bitwise unchanged.

#include "support.h"

#include <mha/multihead_attention.h>

namespace {

using mha::MultiheadAttention;
using mha::MultiheadAttentionOptions;
using torch::Tensor;

MultiheadAttentionOptions opts(int64_t embed_dim, int64_t num_heads) {
  return MultiheadAttentionOptions(embed_dim, num_heads);
}

TEST(ConstructionErrors, NonPositiveEmbedDim) {
  MHA_ASSERT_THROWS_WITH(MultiheadAttention(0, 2),
                         "embed_dim and num_heads must be greater than 0, got embed_dim=0 and "
                         "num_heads=2 instead");
}

TEST(ConstructionErrors, NonPositiveNumHeads) {
  MHA_ASSERT_THROWS_WITH(MultiheadAttention(8, -1),
                         "got embed_dim=8 and num_heads=-1 instead");
}

TEST(ConstructionErrors, EmbedDimNotDivisible) {
  MHA_ASSERT_THROWS_WITH(MultiheadAttention(10, 3),
                         "embed_dim must be divisible by num_heads, got embed_dim=10 and "
                         "num_heads=3");
}

TEST(ConstructionErrors, DropoutOutOfRange) {
  MHA_ASSERT_THROWS_WITH(MultiheadAttention(opts(8, 2).dropout(1.5)),
                         "dropout probability has to be between 0 and 1, but got 1.5");
}

TEST(ConstructionErrors, NonPositiveKdim) {
  MHA_ASSERT_THROWS_WITH(MultiheadAttention(opts(8, 2).kdim(0)),
                         "kdim and vdim must be greater than 0, got kdim=0 and vdim=8");
}

TEST(ConstructionErrors, IsValueErrorType) {
  EXPECT_THROW(MultiheadAttention(0, 1), c10::ValueError);
}

/// A module and inputs L=4, S=6, N=3, E=8, H=2; checks that failures change nothing.
struct ForwardErrors : mha::test::SeedingFixture {
  MultiheadAttention m{MultiheadAttention(8, 2)};
  Tensor q = torch::randn({4, 3, 8});
  Tensor k = torch::randn({6, 3, 8});
  Tensor v = torch::randn({6, 3, 8});
  std::vector<Tensor> before;

  void SetUp() override {
    for (const auto& p : m->parameters()) before.push_back(p.detach().clone());
  }
  void TearDown() override {
    const auto after = m->parameters();
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) {
      EXPECT_TRUE(mha::test::bitwise_equal(after[i].detach(), before[i])) << "parameter " << i;
    }
  }
};

TEST_F(ForwardErrors, UndefinedQuery) {
  MHA_ASSERT_THROWS_WITH(m(Tensor(), k, v), "query, key and value must be defined tensors");
}

TEST_F(ForwardErrors, QueryRank) {
  MHA_ASSERT_THROWS_WITH(m(torch::randn({1, 4, 3, 8}), k, v),
                         "query should be unbatched 2D or batched 3D tensor but received 4-D query "
                         "tensor");
}

TEST_F(ForwardErrors, BatchedQueryWithUnbatchedKey) {
  MHA_ASSERT_THROWS_WITH(m(q, torch::randn({6, 8}), v),
                         "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found "
                         "2-D and 3-D tensors respectively");
}

TEST_F(ForwardErrors, UnbatchedQueryWithBatchedValue) {
  MHA_ASSERT_THROWS_WITH(m(torch::randn({4, 8}), torch::randn({6, 8}), v),
                         "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but "
                         "found 2-D and 3-D tensors respectively");
}

TEST_F(ForwardErrors, QueryFeatureSize) {
  MHA_ASSERT_THROWS_WITH(m(torch::randn({4, 3, 6}), k, v),
                         "was expecting embedding dimension of 8, but got 6");
}

TEST_F(ForwardErrors, KeyFeatureSize) {
  MHA_ASSERT_THROWS_WITH(m(q, torch::randn({6, 3, 5}), v),
                         "expected key feature size (kdim) 8, but got 5");
}

TEST_F(ForwardErrors, ValueFeatureSize) {
  MHA_ASSERT_THROWS_WITH(m(q, k, torch::randn({6, 3, 7})),
                         "expected value feature size (vdim) 8, but got 7");
}

TEST_F(ForwardErrors, BatchSizeMismatch) {
  MHA_ASSERT_THROWS_WITH(m(q, torch::randn({6, 2, 8}), torch::randn({6, 2, 8})),
                         "expected key and value batch size 3 (the query's), but got key 2 and "
                         "value 2");
}

TEST_F(ForwardErrors, KeyValueLengthMismatch) {
  MHA_ASSERT_THROWS_WITH(m(q, k, torch::randn({5, 3, 8})),
                         "expected value sequence length 6 (the key's), but got 5");
}

TEST_F(ForwardErrors, KeyPaddingMaskDtype) {
  MHA_ASSERT_THROWS_WITH(m(q, k, v, torch::zeros({3, 6}, torch::kInt64)),
                         "only bool and floating types of key_padding_mask are supported, but got "
                         "Long");
}

TEST_F(ForwardErrors, AttnMaskDtypeUint8) {
  MHA_ASSERT_THROWS_WITH(m(q, k, v, Tensor(), true, torch::zeros({4, 6}, torch::kUInt8)),
                         "only bool and floating types of attn_mask are supported, but got Byte");
}

TEST_F(ForwardErrors, AttnMask2dShape) {
  MHA_ASSERT_THROWS_WITH(m(q, k, v, Tensor(), true, torch::zeros({3, 6}, torch::kBool)),
                         "The shape of the 2D attn_mask is [3, 6], but should be [4, 6].");
}

TEST_F(ForwardErrors, AttnMask3dShape) {
  MHA_ASSERT_THROWS_WITH(m(q, k, v, Tensor(), true, torch::zeros({3, 4, 6}, torch::kBool)),
                         "The shape of the 3D attn_mask is [3, 4, 6], but should be [6, 4, 6].");
}

TEST_F(ForwardErrors, AttnMaskRank) {
  MHA_ASSERT_THROWS_WITH(m(q, k, v, Tensor(), true, torch::zeros({3, 2, 4, 6}, torch::kBool)),
                         "For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D "
                         "but found 4-D tensor instead");
}

TEST_F(ForwardErrors, UnbatchedAttnMask3dShape) {
  const auto u = torch::randn({4, 8}), uk = torch::randn({6, 8});
  MHA_ASSERT_THROWS_WITH(m(u, uk, uk, Tensor(), true, torch::zeros({3, 4, 6}, torch::kBool)),
                         "Expected `attn_mask` shape to be [2, 4, 6] but got [3, 4, 6]");
}

TEST_F(ForwardErrors, KeyPaddingMaskRank) {
  MHA_ASSERT_THROWS_WITH(m(q, k, v, torch::zeros({6}, torch::kBool)),
                         "For batched (3-D) `query`, expected `key_padding_mask` to be `None` or "
                         "2-D but found 1-D tensor instead");
}

TEST_F(ForwardErrors, KeyPaddingMaskLength) {
  MHA_ASSERT_THROWS_WITH(m(q, k, v, torch::zeros({3, 5}, torch::kBool)),
                         "Expected key_padded_mask.shape[1] to be 6, but got 5");
}

TEST_F(ForwardErrors, KeyPaddingMaskBatch) {
  MHA_ASSERT_THROWS_WITH(m(q, k, v, torch::zeros({2, 6}, torch::kBool)),
                         "Expected key_padded_mask.shape[0] to be 3, but got 2");
}

TEST_F(ForwardErrors, IsCausalWithoutAttnMask) {
  MHA_ASSERT_THROWS_WITH(m(q, k, v, Tensor(), false, Tensor(), true, /*is_causal=*/true),
                         "Need attn_mask if specifying the is_causal hint. You may use the "
                         "Transformer module method `generate_square_subsequent_mask` to create "
                         "this mask.");
}

TEST_F(ForwardErrors, QueryDtypeDiffersFromParameters) {
  MHA_ASSERT_THROWS_WITH(m(q.to(torch::kFloat64), k, v),
                         "expected query to have the parameters' dtype Float, but got Double");
}

TEST_F(ForwardErrors, KeyDtypeDiffersFromQuery) {
  MHA_ASSERT_THROWS_WITH(m(q, k.to(torch::kFloat16), v),
                         "expected key to have the parameters' dtype Float, but got Half");
}

TEST_F(ForwardErrors, ValueOnOtherDevice) {
  MHA_ASSERT_THROWS_WITH(m(q, k, torch::empty({6, 3, 8}, torch::kMeta)),
                         "expected value on the parameters' device cpu, but got meta");
}

TEST_F(ForwardErrors, MaskOnOtherDevice) {
  MHA_ASSERT_THROWS_WITH(m(q, k, v, torch::empty({3, 6}, torch::dtype(torch::kBool).device(torch::kMeta))),
                         "expected key_padding_mask on the query's device cpu, but got meta");
}

}  // namespace
