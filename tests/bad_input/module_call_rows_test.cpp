// The module's bad-input rows, one table per call: construction, forward
// (query, key, value), the key padding mask, the attention mask, and the
// functional form (bad_input/bad_input_table.h).

#include <mha/functional.h>

#include "bad_input/bad_input_table.h"

namespace mha {
namespace test {
namespace bad_input {
namespace {

namespace F = mha::functional;

Tensor on_meta(std::vector<int64_t> shape, c10::ScalarType dtype = torch::kFloat32) {
  return torch::empty(shape, torch::dtype(dtype).device(torch::kMeta));
}

/// Functional-form options matching module `m` (sequence-first).
F::MultiheadAttentionForwardFuncOptions functional_options(MultiheadAttention& m) {
  return F::MultiheadAttentionForwardFuncOptions(
             m->options.embed_dim(), m->options.num_heads(), m->in_proj_weight, m->in_proj_bias,
             m->bias_k, m->bias_v, m->options.add_zero_attn(), m->options.dropout(),
             m->out_proj->weight, m->out_proj->bias)
      .training(m->is_training());
}

/// Construction: invalid options (ValueError, nothing drawn from the generator).
std::vector<Row> construction_rows() {
  return {construction("EmbedDimZero", opts(0, 2),
                       {"embed_dim and num_heads must be greater than 0", "embed_dim=0"}),
          construction("EmbedDimNegative", opts(-8, 2), {"greater than 0", "embed_dim=-8"}),
          construction("NumHeadsZero", opts(8, 0), {"greater than 0", "num_heads=0"}),
          construction("NumHeadsNegative", opts(8, -1),
                       {"greater than 0", "embed_dim=8 and num_heads=-1"}),
          construction("EmbedDimNotDivisible", opts(10, 3),
                       {"embed_dim must be divisible by num_heads", "embed_dim=10", "num_heads=3"}),
          construction("HeadsAboveEmbedDim", opts(2, 4),
                       {"divisible by num_heads", "embed_dim=2", "num_heads=4"}),
          construction("DropoutAboveOne", opts(8, 2).dropout(1.5),
                       {"dropout probability has to be between 0 and 1, but got 1.5"}),
          construction("DropoutNegative", opts(8, 2).dropout(-0.25),
                       {"dropout probability", "between 0 and 1", "-0.25"}),
          construction("DropoutNaN", opts(8, 2).dropout(std::nan("")),
                       {"dropout probability", "between 0 and 1", "nan"}),
          construction("KdimZero", opts(8, 2).kdim(0),
                       {"kdim and vdim must be greater than 0", "kdim=0", "vdim=8"}),
          construction("VdimNegative", opts(8, 2).kdim(4).vdim(-3),
                       {"greater than 0", "kdim=4", "vdim=-3"})};
}

/// forward: query, key and value.
std::vector<Row> input_rows() {
  using M = MultiheadAttention;
  using I = Inputs;
  return {
      forward("UndefinedQuery", [](M& m, const I& x) { m(Tensor(), x.k, x.v); },
              {"expected query to be a defined tensor, but got an undefined one"}),
      forward("UndefinedKey", [](M& m, const I& x) { m(x.q, Tensor(), x.v); },
              {"expected key to be a defined tensor"}),
      forward("UndefinedValue", [](M& m, const I& x) { m(x.q, x.k, Tensor()); },
              {"expected value to be a defined tensor"}),
      forward("QueryRank4", [](M& m, const I& x) { m(torch::randn({1, 4, 3, 8}), x.k, x.v); },
              {"query should be unbatched 2D or batched 3D tensor but received 4-D query tensor"}),
      forward("QueryRank1", [](M& m, const I& x) { m(torch::randn({8}), x.k, x.v); },
              {"query should be unbatched 2D or batched 3D", "1-D query"}),
      forward("QueryScalar", [](M& m, const I& x) { m(torch::tensor(1.0f), x.k, x.v); },
              {"query should be unbatched 2D or batched 3D", "0-D query"}),
      forward("BatchedQueryUnbatchedKey",
              [](M& m, const I& x) { m(x.q, torch::randn({6, 8}), x.v); },
              {"For batched (3-D) `query`, expected `key` and `value` to be 3-D but found 2-D and "
               "3-D tensors respectively"}),
      forward("BatchedQueryUnbatchedValue",
              [](M& m, const I& x) { m(x.q, x.k, torch::randn({6, 8})); },
              {"expected `key` and `value` to be 3-D but found 3-D and 2-D"}),
      forward("UnbatchedQueryBatchedValue",
              [](M& m, const I& x) { m(torch::randn({4, 8}), torch::randn({6, 8}), x.v); },
              {"For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found 2-D "
               "and 3-D tensors respectively"}),
      forward("QueryFeatureSize", [](M& m, const I& x) { m(torch::randn({4, 3, 6}), x.k, x.v); },
              {"was expecting embedding dimension of 8, but got 6"}),
      forward("KeyFeatureSize", [](M& m, const I& x) { m(x.q, torch::randn({6, 3, 5}), x.v); },
              {"expected key feature size (kdim) 8, but got 5"}),
      forward("ValueFeatureSize", [](M& m, const I& x) { m(x.q, x.k, torch::randn({6, 3, 7})); },
              {"expected value feature size (vdim) 8, but got 7"}),
      forward(
          "KeyFeatureSizeWithKdim", [](M& m, const I& x) { m(x.q, x.k, torch::randn({6, 3, 7})); },
          {"expected key feature size (kdim) 5, but got 8"}, Kind::kError,
          opts(8, 2).kdim(5).vdim(7)),
      forward(
          "ValueFeatureSizeWithVdim",
          [](M& m, const I& x) { m(x.q, torch::randn({6, 3, 5}), x.v); },
          {"expected value feature size (vdim) 7, but got 8"}, Kind::kError,
          opts(8, 2).kdim(5).vdim(7)),
      forward("KeyBatchSize",
              [](M& m, const I& x) { m(x.q, torch::randn({6, 2, 8}), torch::randn({6, 2, 8})); },
              {"expected key and value batch size 3 (the query's), but got key 2 and value 2"}),
      forward("ValueBatchSize", [](M& m, const I& x) { m(x.q, x.k, torch::randn({6, 4, 8})); },
              {"expected key and value batch size 3 (the query's), but got key 3 and value 4"}),
      forward(
          "BatchFirstKeyBatchSize",
          [](M& m, const I&) {
            m(torch::randn({3, 4, 8}), torch::randn({2, 6, 8}), torch::randn({2, 6, 8}));
          },
          {"batch size 3 (the query's), but got key 2 and value 2"}, Kind::kError,
          opts(8, 2).batch_first(true)),
      forward("ValueSequenceLength", [](M& m, const I& x) { m(x.q, x.k, torch::randn({5, 3, 8})); },
              {"expected value sequence length 6 (the key's), but got 5"}),
      forward("UnbatchedValueSequenceLength",
              [](M& m, const I&) {
                m(torch::randn({4, 8}), torch::randn({6, 8}), torch::randn({7, 8}));
              },
              {"expected value sequence length 6 (the key's), but got 7"}),
      forward(
          "QueryDtypeDouble", [](M& m, const I& x) { m(x.q.to(torch::kFloat64), x.k, x.v); },
          {"expected query to have the parameters' dtype Float, but got Double"}, Kind::kError),
      forward(
          "KeyDtypeHalf", [](M& m, const I& x) { m(x.q, x.k.to(torch::kFloat16), x.v); },
          {"expected key to have the parameters' dtype Float, but got Half"}, Kind::kError),
      forward(
          "ValueDtypeLong", [](M& m, const I& x) { m(x.q, x.k, x.v.to(torch::kInt64)); },
          {"expected value to have the parameters' dtype Float, but got Long"}, Kind::kError),
      forward(
          "QueryFloatOnDoubleModule",
          [](M& m, const I& x) {
            m->to(torch::kFloat64);
            m(x.q, x.k, x.v);
          },
          {"expected query to have the parameters' dtype Double, but got Float"}, Kind::kError),
      forward("QueryOnMeta", [](M& m, const I& x) { m(on_meta({4, 3, 8}), x.k, x.v); },
              {"expected query on the parameters' device cpu, but got meta"}),
      forward("ValueOnMeta", [](M& m, const I& x) { m(x.q, x.k, on_meta({6, 3, 8})); },
              {"expected value on the parameters' device cpu, but got meta"})};
}

/// forward: key_padding_mask.
std::vector<Row> key_padding_mask_rows() {
  using M = MultiheadAttention;
  using I = Inputs;
  return {
      forward(
          "KeyPaddingMaskLong",
          [](M& m, const I& x) { m(x.q, x.k, x.v, torch::zeros({3, 6}, torch::kInt64)); },
          {"only bool and floating types of key_padding_mask are supported, but got Long"},
          Kind::kTypeError),
      forward(
          "KeyPaddingMaskByte",
          [](M& m, const I& x) { m(x.q, x.k, x.v, torch::zeros({3, 6}, torch::kUInt8)); },
          {"only bool and floating types of key_padding_mask are supported, but got Byte"},
          Kind::kTypeError),
      forward("KeyPaddingMaskRank1", [](M& m, const I& x) { m(x.q, x.k, x.v, bools({6})); },
              {"For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but "
               "found 1-D tensor instead"}),
      forward("KeyPaddingMaskRank3", [](M& m, const I& x) { m(x.q, x.k, x.v, bools({3, 1, 6})); },
              {"expected `key_padding_mask` to be `None` or 2-D but found 3-D"}),
      forward("KeyPaddingMaskLength", [](M& m, const I& x) { m(x.q, x.k, x.v, bools({3, 5})); },
              {"Expected key_padded_mask.shape[1] to be 6, but got 5"}),
      forward("KeyPaddingMaskBatch", [](M& m, const I& x) { m(x.q, x.k, x.v, bools({2, 6})); },
              {"Expected key_padded_mask.shape[0] to be 3, but got 2"}),
      forward("KeyPaddingMaskOnMeta",
              [](M& m, const I& x) { m(x.q, x.k, x.v, on_meta({3, 6}, torch::kBool)); },
              {"expected key_padding_mask on the query's device cpu, but got meta"}),
      forward("UnbatchedKeyPaddingMaskRank2",
              [](M& m, const I&) {
                m(torch::randn({4, 8}), torch::randn({6, 8}), torch::randn({6, 8}), bools({1, 6}));
              },
              {"For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D but "
               "found 2-D tensor instead"}),
      forward("UnbatchedKeyPaddingMaskLength",
              [](M& m, const I&) {
                m(torch::randn({4, 8}), torch::randn({6, 8}), torch::randn({6, 8}), bools({5}));
              },
              {"Expected key_padded_mask.shape[1] to be 6, but got 5"}),
      forward(
          "KeyPaddingMaskDoubleWithWeights",
          [](M& m, const I& x) { m(x.q, x.k, x.v, torch::zeros({3, 6}, torch::kFloat64)); },
          {"attention mask", "key_padding_mask", "query's dtype Float", "but got Double"},
          Kind::kTypeError)};
}

/// forward: attn_mask and is_causal.
std::vector<Row> attn_mask_rows() {
  using M = MultiheadAttention;
  using I = Inputs;
  const Tensor none;
  return {
      forward(
          "AttnMaskByte",
          [=](M& m, const I& x) {
            m(x.q, x.k, x.v, none, true, torch::zeros({4, 6}, torch::kUInt8));
          },
          {"only bool and floating types of attn_mask are supported, but got Byte"},
          Kind::kTypeError),
      forward(
          "AttnMaskInt",
          [=](M& m, const I& x) {
            m(x.q, x.k, x.v, none, false, torch::zeros({4, 6}, torch::kInt32));
          },
          {"only bool and floating types of attn_mask are supported, but got Int"},
          Kind::kTypeError),
      forward("AttnMask2dShape",
              [=](M& m, const I& x) { m(x.q, x.k, x.v, none, true, bools({3, 6})); },
              {"The shape of the 2D attn_mask is torch.Size([3, 6]), but should be (4, 6)."}),
      forward("AttnMask2dSourceLength",
              [=](M& m, const I& x) { m(x.q, x.k, x.v, none, false, bools({4, 7})); },
              {"The shape of the 2D attn_mask is torch.Size([4, 7]), but should be (4, 6)."}),
      forward("AttnMask3dShape",
              [=](M& m, const I& x) { m(x.q, x.k, x.v, none, true, bools({3, 4, 6})); },
              {"The shape of the 3D attn_mask is torch.Size([3, 4, 6]), but should be (6, 4, 6)."}),
      forward("AttnMaskRank4",
              [=](M& m, const I& x) { m(x.q, x.k, x.v, none, true, bools({3, 2, 4, 6})); },
              {"For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
               "4-D tensor instead"}),
      forward("AttnMaskRank1", [=](M& m, const I& x) { m(x.q, x.k, x.v, none, true, bools({6})); },
              {"expected `attn_mask` to be `None`, 2-D or 3-D but found 1-D"}),
      forward("UnbatchedAttnMask3dShape",
              [=](M& m, const I&) {
                m(torch::randn({4, 8}), torch::randn({6, 8}), torch::randn({6, 8}), none, true,
                  bools({3, 4, 6}));
              },
              {"Expected `attn_mask` shape to be (2, 4, 6) but got torch.Size([3, 4, 6])"}),
      forward("UnbatchedAttnMaskRank4",
              [=](M& m, const I&) {
                m(torch::randn({4, 8}), torch::randn({6, 8}), torch::randn({6, 8}), none, true,
                  bools({1, 2, 4, 6}));
              },
              {"For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
               "found 4-D tensor instead"}),
      forward(
          "AttnMaskOnMeta",
          [=](M& m, const I& x) { m(x.q, x.k, x.v, none, true, on_meta({4, 6}, torch::kBool)); },
          {"expected attn_mask on the query's device cpu, but got meta"}),
      forward(
          "AttnMaskDoubleWithWeights",
          [=](M& m, const I& x) {
            m(x.q, x.k, x.v, none, true, torch::zeros({4, 6}, torch::kFloat64));
          },
          {"attn_mask", "query's dtype Float", "but got Double"}, Kind::kTypeError),
      forward("AttnMaskDoubleWithoutWeights",
              [=](M& m, const I& x) {
                m(x.q, x.k, x.v, none, false, torch::zeros({4, 6}, torch::kFloat64));
              },
              {"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
               "attn_mask.dtype: double and  query.dtype: float"}),
      forward(
          "IsCausalWithoutAttnMask",
          [=](M& m, const I& x) { m(x.q, x.k, x.v, none, false, none, true, /*is_causal=*/true); },
          {"Need attn_mask if specifying the is_causal hint."})};
}

/// The functional form.
std::vector<Row> functional_rows() {
  using M = MultiheadAttention;
  using I = Inputs;
  return {
      forward("FunctionalEmbedDimToCheck",
              [](M& m, const I& x) {
                F::multi_head_attention_forward(x.q, x.k, x.v,
                                                functional_options(m).embed_dim_to_check(16));
              },
              {"was expecting embedding dimension of 16, but got 8"}),
      forward("FunctionalKeyValueShape",
              [](M& m, const I& x) {
                F::multi_head_attention_forward(x.q, x.k, torch::randn({5, 3, 8}),
                                                functional_options(m));
              },
              {"key shape torch.Size([6, 3, 8]) does not match value shape torch.Size([5, 3, 8])"}),
      forward("FunctionalStaticKBatchHeads",
              [](M& m, const I& x) {
                F::multi_head_attention_forward(
                    x.q, x.k, x.v, functional_options(m).static_k(torch::randn({5, 6, 4})));
              },
              {"expecting static_k.size(0) of 6, but got 5"}),
      forward("FunctionalStaticVHeadDim",
              [](M& m, const I& x) {
                F::multi_head_attention_forward(
                    x.q, x.k, x.v, functional_options(m).static_v(torch::randn({6, 6, 3})));
              },
              {"expecting static_v.size(2) of 4, but got 3"}),
      forward("FunctionalKeyWeightShape",
              [](M& m, const I& x) {
                auto o = functional_options(m)
                             .use_separate_proj_weight(true)
                             .q_proj_weight(torch::randn({8, 8}))
                             .k_proj_weight(torch::randn({8, 5}))
                             .v_proj_weight(torch::randn({8, 8}));
                F::multi_head_attention_forward(x.q, x.k, x.v, o);
              },
              {"expecting key weights shape of (8, 8), but got torch.Size([8, 5])"})};
}

}  // namespace

std::vector<Row> module_call_rows() {
  std::vector<Row> all;
  for (auto table :
       {construction_rows, input_rows, key_padding_mask_rows, attn_mask_rows, functional_rows}) {
    for (auto& row : table()) all.push_back(std::move(row));
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(ModuleCalls,
                         BadInputTable,
                         ::testing::ValuesIn(module_call_rows()),
                         row_name);

}  // namespace bad_input
}  // namespace test
}  // namespace mha
