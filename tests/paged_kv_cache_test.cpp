// The paged KV cache (mha/paged_kv_cache.h) and forward_paged: several
// sequences' new positions in one call, each sequence's rows equal to
// forward_cached of that sequence alone; fork (copy on write), release, the
// pool's accounting, and bad input that changes no sequence.

#include <gtest/gtest.h>
#include <mha/mha.h>
#include <mha/paged_kv_cache.h>
#include <torch/torch.h>

#include <map>
#include <vector>

#include "support.h"

namespace {

using mha::test::tensors_close;
using torch::Tensor;

constexpr int64_t kE = 32, kHeads = 4;

mha::MultiheadAttention make_attention() {
  torch::manual_seed(0);
  mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(kE, kHeads).batch_first(true));
  attn->eval();
  return attn;
}

/// One sequence decoded alone with forward_cached, chunk by chunk.
struct Alone {
  mha::KVCache cache = mha::KVCache::self_attention();
  Tensor step(mha::MultiheadAttention& attn, const Tensor& x) {  // (L, E) -> (L, E)
    const Tensor batched = x.unsqueeze(0);
    return std::get<0>(attn->forward_cached(batched, batched, batched, cache)).squeeze(0);
  }
};

Tensor offsets(const std::vector<int64_t>& lengths) {
  std::vector<int32_t> cu{0};
  for (const int64_t l : lengths) cu.push_back(cu.back() + static_cast<int32_t>(l));
  return torch::tensor(cu, torch::kInt);
}

/// forward_paged of the chunks `x[i]` (L_i, E) of sequences `ids`, split back per sequence.
std::vector<Tensor> paged_step(mha::MultiheadAttention& attn,
                               mha::PagedKVCache& cache,
                               const std::vector<int64_t>& ids,
                               const std::vector<Tensor>& x) {
  std::vector<int64_t> lengths;
  for (const auto& t : x) lengths.push_back(t.size(0));
  const Tensor rows = torch::cat(x);
  const Tensor out =
      std::get<0>(attn->forward_paged(rows, rows, rows, cache, ids, offsets(lengths)));
  return out.split_with_sizes(lengths);
}

/// At a served size (E = 512, 8 heads, block 16): prompts of 16-128 rows,
/// then decode steps (the paged decode kernel) with prompt chunks of late
/// joiners in some of them; each sequence within float32 rounding of its
/// forward_cached decoding alone.
TEST(PagedKVCache, DecodeStepsAtAServedSizeEqualEachSequenceAlone) {
  torch::manual_seed(3);
  mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(512, 8).batch_first(true));
  attn->eval();
  torch::NoGradGuard no_grad;
  for (auto& p : attn->parameters()) p.uniform_(-0.1, 0.1);  // nonzero biases too
  mha::PagedKVCache cache(*attn, mha::PagedKVCacheOptions(/*num_blocks=*/256, /*block_size=*/16));
  std::map<int64_t, Alone> alone;
  std::vector<int64_t> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(cache.add_sequence());
  const std::vector<int64_t> prompts = {16, 128, 37, 64, 0, 0};
  for (int step = 0; step < 12; ++step) {
    std::vector<Tensor> x;
    for (size_t i = 0; i < ids.size(); ++i) {
      const int64_t joins = i < 4 ? 0 : 3 + 4 * static_cast<int64_t>(i - 4);  // steps 3 and 7
      const int64_t rows = step == joins ? (i < 4 ? prompts[i] : 50) : (step > joins ? 1 : 0);
      x.push_back(torch::randn({rows, 512}));
    }
    const auto outs = paged_step(attn, cache, ids, x);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (x[i].size(0) == 0) continue;
      // rtol 1e-4: the GEMMs over the call's rows and over one sequence's sum
      // 512 products in different orders (measured: 2e-6 on outputs of 0.08).
      EXPECT_TRUE(tensors_close(outs[i], alone[ids[i]].step(attn, x[i]), 1e-4, 1e-5))
          << "sequence " << i << " step " << step;
    }
  }
}

TEST(PagedKVCache, EachSequenceEqualsItsCachedDecodingAlone) {
  auto attn = make_attention();
  mha::PagedKVCache cache(*attn, mha::PagedKVCacheOptions(/*num_blocks=*/32, /*block_size=*/4));
  std::map<int64_t, Alone> alone;
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(cache.add_sequence());
  for (const int64_t id : ids) alone[id];
  torch::NoGradGuard no_grad;
  // Prompts of different lengths, then steps of one position, sequences joining late.
  const std::vector<std::vector<int64_t>> rounds = {{5, 3, 0}, {1, 1, 7}, {1, 2, 1}, {1, 1, 1}};
  for (const auto& lengths : rounds) {
    std::vector<int64_t> step_ids;
    std::vector<Tensor> x;
    for (size_t i = 0; i < ids.size(); ++i) {
      step_ids.push_back(ids[i]);
      x.push_back(torch::randn({lengths[i], kE}));
    }
    const auto outs = paged_step(attn, cache, step_ids, x);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (lengths[i] == 0) continue;
      EXPECT_TRUE(tensors_close(outs[i], alone[ids[i]].step(attn, x[i]), 1e-5, 1e-6))
          << "sequence " << ids[i];
      EXPECT_EQ(cache.length(ids[i]), alone[ids[i]].cache.length());
    }
  }
}

TEST(PagedKVCache, BlocksAreTakenAsSequencesGrowAndFreedOnRelease) {
  auto attn = make_attention();
  mha::PagedKVCache cache(*attn, mha::PagedKVCacheOptions(8, 4));
  const int64_t a = cache.add_sequence();
  torch::NoGradGuard no_grad;
  paged_step(attn, cache, {a}, {torch::randn({5, kE})});
  EXPECT_EQ(cache.length(a), 5);
  EXPECT_EQ(cache.num_free_blocks(), 6);  // ceil(5 / 4) = 2 blocks held
  EXPECT_EQ(cache.used_bytes(), cache.memory_bytes() / 8 * 2);
  cache.release(a);
  EXPECT_EQ(cache.num_free_blocks(), 8);
  EXPECT_FALSE(cache.contains(a));
}

TEST(PagedKVCache, ForkSharesThePrefixAndCopiesOnWrite) {
  auto attn = make_attention();
  mha::PagedKVCache cache(*attn, mha::PagedKVCacheOptions(8, 4));
  Alone a_alone, b_alone;
  const int64_t a = cache.add_sequence();
  torch::NoGradGuard no_grad;
  const Tensor prompt = torch::randn({6, kE});
  paged_step(attn, cache, {a}, {prompt});
  a_alone.step(attn, prompt);
  b_alone.step(attn, prompt);
  const int64_t b = cache.fork(a);
  EXPECT_EQ(cache.length(b), 6);
  EXPECT_EQ(cache.num_free_blocks(), 6);  // the two blocks are shared
  const Tensor xa = torch::randn({1, kE}), xb = torch::randn({1, kE});
  const auto outs = paged_step(attn, cache, {a, b}, {xa, xb});
  EXPECT_EQ(cache.num_free_blocks(), 5);  // the first writer copied the shared tail block
  EXPECT_TRUE(tensors_close(outs[0], a_alone.step(attn, xa), 1e-5, 1e-6));
  EXPECT_TRUE(tensors_close(outs[1], b_alone.step(attn, xb), 1e-5, 1e-6));
  cache.release(a);
  EXPECT_EQ(cache.num_free_blocks(), 6);  // a's own tail; the first block is still b's
}

TEST(PagedKVCache, BadInputIsAnErrorAndChangesNoSequence) {
  auto attn = make_attention();
  mha::PagedKVCache cache(*attn, mha::PagedKVCacheOptions(2, 4));
  const int64_t a = cache.add_sequence(), b = cache.add_sequence();
  torch::NoGradGuard no_grad;
  paged_step(attn, cache, {a}, {torch::randn({3, kE})});
  const Tensor x = torch::randn({6, kE});
  MHA_ASSERT_THROWS_WITH(attn->forward_paged(x, x, x, cache, {a, b}, offsets({1, 5})),
                         "out of blocks: the call needs 2 new blocks of 4 positions, and 1 of 2 "
                         "are free");
  MHA_ASSERT_THROWS_WITH(attn->forward_paged(x, x, x, cache, {a, 7}, offsets({3, 3})),
                         "unknown sequence id 7");
  MHA_ASSERT_THROWS_WITH(attn->forward_paged(x, x, x, cache, {a, a}, offsets({3, 3})),
                         "expected distinct sequence ids, but 0 is repeated");
  MHA_ASSERT_THROWS_WITH(attn->forward_paged(x, x, x, cache, {a, b}, offsets({3, 2})),
                         "expected cu_seqlens to start at 0 and end at 6");
  MHA_ASSERT_THROWS_WITH(
      attn->forward_paged(x, x, x, cache, {a, b}, torch::tensor({0.0, 3.0, 6.0})),
      "expected cu_seqlens of dtype int32 or int64");
  const Tensor as_double = x.to(torch::kDouble);
  MHA_ASSERT_THROWS_WITH(
      attn->forward_paged(as_double, as_double, as_double, cache, {a, b}, offsets({3, 3})), "");
  EXPECT_EQ(cache.length(a), 3);
  EXPECT_EQ(cache.length(b), 0);
  EXPECT_EQ(cache.num_free_blocks(), 1);
  MHA_ASSERT_THROWS_WITH(cache.release(9), "unknown sequence id 9");
  attn->train();
  MHA_ASSERT_THROWS_WITH(attn->forward_paged(x, x, x, cache, {a, b}, offsets({3, 3})),
                         "call module->eval()");
}

TEST(PagedKVCache, QuantizedModulesDecodeThroughIt) {
  auto attn = make_attention();
  mha::quantize_dynamic(attn);
  mha::PagedKVCache cache(*attn, mha::PagedKVCacheOptions(8, 4));
  Alone alone;
  const int64_t a = cache.add_sequence();
  torch::NoGradGuard no_grad;
  const Tensor prompt = torch::randn({5, kE});
  // One sequence: the same rows in both calls, so the same int8 activations' scales.
  EXPECT_TRUE(tensors_close(paged_step(attn, cache, {a}, {prompt})[0], alone.step(attn, prompt),
                            1e-5, 1e-6));
}

}  // namespace
