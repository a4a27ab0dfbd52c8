// One paged cache per stack (make_paged_cache): the
// layers' caches share one block table (ids, lengths, free list); a stack
// step grows it once for every layer, all or nothing; fork and copy on write
// act in every layer's pool; a layer's own call on a shared table adds no
// positions; ContinuousBatch over both kinds of stack counts its pools. At
// E = 512 (the packed GEMMs run). Results are compared bitwise with the
// per-layer caches of before (each layer its own table, called layer by
// layer) and with each sequence decoded alone.

#include <gtest/gtest.h>
#include <mha/batching.h>
#include <mha/mha.h>
#include <torch/torch.h>

#include <functional>
#include <vector>

#include "stack_fixtures.h"
#include "support.h"

namespace {

using mha::test::tensors_close;
using torch::Tensor;

constexpr int64_t kE = mha::test::kStackE, kHeads = mha::test::kStackHeads, kBlock = 4;

using mha::test::make_causal_stack;
using mha::test::make_decoder;

mha::TransformerEncoderLayerImpl& layer(mha::TransformerEncoder& stack, size_t i) {
  return *stack->layers[i]->as<mha::TransformerEncoderLayerImpl>();
}

Tensor offsets(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> cu{0};
  for (const int64_t l : lengths) cu.push_back(cu.back() + l);
  return torch::tensor(cu, torch::kLong);
}

/// The per-layer caches of before: each layer its own block table.
std::vector<mha::PagedKVCache> separate_caches(mha::TransformerEncoder& stack, int64_t blocks) {
  std::vector<mha::PagedKVCache> caches;
  for (size_t i = 0; i < stack->layers->size(); ++i) {
    caches.emplace_back(*layer(stack, i).self_attn, mha::PagedKVCacheOptions(blocks, kBlock));
  }
  return caches;
}

/// The layers' caches of a stack cache, to check each.
std::vector<std::reference_wrapper<mha::PagedKVCache>> layers_of(mha::PagedStackCache& cache) {
  std::vector<std::reference_wrapper<mha::PagedKVCache>> layers;
  for (int64_t i = 0; i < cache.num_layers(); ++i) layers.emplace_back(cache.layer(i));
  return layers;
}

/// A step as before: layer by layer, each growing its own table; (T, E).
Tensor layer_by_layer(mha::TransformerEncoder& stack,
                      std::vector<mha::PagedKVCache>& caches,
                      const std::vector<int64_t>& ids,
                      const Tensor& x,
                      const std::vector<int64_t>& lengths) {
  Tensor y = x;
  for (size_t i = 0; i < caches.size(); ++i) {
    y = layer(stack, i).forward_paged(y, caches[i], ids, offsets(lengths));
  }
  return y;
}

TEST(PagedStackCache, TheLayersShareIdsAndOneBlockTable) {
  auto stack = make_causal_stack(6);
  auto caches = stack->make_paged_cache(mha::PagedKVCacheOptions(16, kBlock));
  ASSERT_EQ(caches.num_layers(), 6);
  for (const mha::PagedKVCache& cache : layers_of(caches))
    EXPECT_TRUE(cache.shares_blocks_with(caches.layer(0)));
  const int64_t a = caches.layer(3).add_sequence(), b = caches.layer(5).add_sequence();
  EXPECT_NE(a, b);
  const int64_t c = caches.layer(1).fork(a);
  for (const mha::PagedKVCache& cache : layers_of(caches)) {
    EXPECT_EQ(cache.sequence_ids(), (std::vector<int64_t>{a, b, c}));
  }
  caches.layer(4).release(b);
  for (const mha::PagedKVCache& cache : layers_of(caches)) EXPECT_FALSE(cache.contains(b));
  auto apart = separate_caches(stack, 16);
  EXPECT_FALSE(apart[0].shares_blocks_with(apart[1]));
  auto five_layers = make_causal_stack(5)->make_paged_cache(mha::PagedKVCacheOptions(16, kBlock));
  const int64_t e = five_layers.add_sequence();
  MHA_ASSERT_THROWS_WITH(
      stack->forward_paged(torch::randn({1, kE}), five_layers, {e}, offsets({1})),
      "expected cache to hold one cache per layer (6), but got 5");
  MHA_ASSERT_THROWS_WITH(mha::PagedStackCache({}, mha::PagedKVCacheOptions(4)),
                         "expected at least one module");
  MHA_ASSERT_THROWS_WITH(mha::PagedStackCache({nullptr}, mha::PagedKVCacheOptions(4)),
                         "expected modules[0] to be a module, but got nullptr");
}

TEST(PagedStackCache, OneStepGrowsTheTableOnceForSixLayers) {
  auto stack = make_causal_stack(6);
  auto shared = stack->make_paged_cache(mha::PagedKVCacheOptions(16, kBlock));
  auto apart = separate_caches(stack, 16);
  torch::NoGradGuard no_grad;
  const int64_t a = shared.layer(0).add_sequence(), b = shared.layer(0).add_sequence();
  for (auto& cache : apart) {
    cache.add_sequence();
    cache.add_sequence();
  }
  // (lengths of a and b, blocks held after the step)
  for (const auto& [lengths, held] :
       std::vector<std::pair<std::vector<int64_t>, int64_t>>{{{6, 3}, 3}, {{1, 2}, 4}}) {
    const Tensor x = torch::randn({lengths[0] + lengths[1], kE});
    const Tensor y = stack->forward_paged(x, shared, {a, b}, offsets(lengths));
    EXPECT_TRUE(torch::equal(y, layer_by_layer(stack, apart, {a, b}, x, lengths)));
    for (const mha::PagedKVCache& cache : layers_of(shared)) {
      EXPECT_EQ(cache.num_free_blocks(), 16 - held);
      EXPECT_EQ(cache.length(a), shared.layer(5).length(a));
      EXPECT_EQ(cache.memory_bytes(), 2 * 16 * kBlock * kE * 4);
    }
  }
  EXPECT_EQ(shared.layer(0).length(a), 7);
  EXPECT_EQ(shared.layer(0).length(b), 5);
  EXPECT_EQ(apart[5].num_free_blocks(), shared.layer(5).num_free_blocks());
}

TEST(PagedStackCache, AnOutOfBlocksStepChangesNoLayer) {
  auto stack = make_causal_stack(6);
  auto shared = stack->make_paged_cache(mha::PagedKVCacheOptions(3, kBlock));
  auto apart = separate_caches(stack, 3);
  torch::NoGradGuard no_grad;
  const int64_t a = shared.layer(0).add_sequence();
  for (auto& cache : apart) cache.add_sequence();
  const Tensor prompt = torch::randn({6, kE});  // 2 of the 3 blocks
  stack->forward_paged(prompt, shared, {a}, offsets({6}));
  layer_by_layer(stack, apart, {a}, prompt, {6});
  MHA_ASSERT_THROWS_WITH(stack->forward_paged(torch::randn({7, kE}), shared, {a}, offsets({7})),
                         "out of blocks: the call needs 2 new blocks of 4 positions, and 1 of 3");
  MHA_ASSERT_THROWS_WITH(
      stack->forward_paged(torch::randn({2, kE}), shared, {a, 9}, offsets({1, 1})),
      "unknown sequence id 9");
  for (const mha::PagedKVCache& cache : layers_of(shared)) {
    EXPECT_EQ(cache.length(a), 6);
    EXPECT_EQ(cache.num_free_blocks(), 1);
  }
  // No pool was written either: the next step is bitwise the one of caches that never failed.
  const Tensor x = torch::randn({2, kE});
  EXPECT_TRUE(torch::equal(stack->forward_paged(x, shared, {a}, offsets({2})),
                           layer_by_layer(stack, apart, {a}, x, {2})));
}

TEST(PagedStackCache, ALayersOwnCallOnASharedTableAddsNoPositions) {
  auto stack = make_causal_stack(2);
  auto shared = stack->make_paged_cache(mha::PagedKVCacheOptions(4, kBlock));
  const int64_t a = shared.layer(0).add_sequence();
  torch::NoGradGuard no_grad;
  const Tensor x = torch::randn({2, kE});
  MHA_ASSERT_THROWS_WITH(layer(stack, 0).forward_paged(x, shared.layer(0), {a}, offsets({2})),
                         "this cache shares its block table with other layers' caches");
  MHA_ASSERT_THROWS_WITH(
      layer(stack, 1).self_attn->forward_paged(x, x, x, shared.layer(1), {a}, offsets({2})),
      "grows only in a stack step");
  EXPECT_EQ(shared.layer(0).length(a), 0);
  EXPECT_EQ(shared.layer(0).num_free_blocks(), 4);
  // A cross-attention cache's later calls only read: allowed outside a stack step.
  auto decoder = make_decoder(2);
  auto self = decoder->make_paged_cache(mha::PagedKVCacheOptions(4, kBlock));
  auto memory_cache = decoder->make_paged_memory_cache(mha::PagedKVCacheOptions(4, kBlock));
  const int64_t d = self.layer(0).add_sequence();
  ASSERT_EQ(memory_cache.layer(0).add_sequence(), d);
  const Tensor memory = torch::randn({5, kE});
  decoder->forward_paged(torch::randn({1, kE}), memory, self, memory_cache, {d}, offsets({1}),
                         offsets({5}));
  auto& cross = *decoder->layers[1]->as<mha::TransformerDecoderLayerImpl>()->multihead_attn;
  const Tensor read = std::get<0>(
      cross.forward_paged(x, Tensor(), Tensor(), memory_cache.layer(1), {d}, offsets({2})));
  EXPECT_EQ(read.sizes(), x.sizes());
  EXPECT_EQ(memory_cache.layer(1).length(d), 5);
}

TEST(PagedStackCache, ForkCopiesOnWriteInEveryLayerBitwiseAsEachSequenceAlone) {
  auto stack = make_causal_stack(3);
  auto shared = stack->make_paged_cache(mha::PagedKVCacheOptions(8, kBlock));
  auto alone_a = stack->make_paged_cache(mha::PagedKVCacheOptions(8, kBlock));
  auto alone_b = stack->make_paged_cache(mha::PagedKVCacheOptions(8, kBlock));
  torch::NoGradGuard no_grad;
  const int64_t a = shared.layer(0).add_sequence(), ia = alone_a.layer(0).add_sequence(),
                ib = alone_b.layer(0).add_sequence();
  const Tensor prompt = torch::randn({6, kE});  // blocks 0 and half of 1
  stack->forward_paged(prompt, shared, {a}, offsets({6}));
  stack->forward_paged(prompt, alone_a, {ia}, offsets({6}));
  stack->forward_paged(prompt, alone_b, {ib}, offsets({6}));
  const int64_t b = shared.layer(2).fork(a);
  for (int step = 0; step < 4; ++step) {
    const Tensor xa = torch::randn({1, kE}), xb = torch::randn({1, kE});
    // a writes first: it copies the shared tail (in every layer's pool); b then writes in place.
    EXPECT_TRUE(torch::equal(stack->forward_paged(xa, shared, {a}, offsets({1})),
                             stack->forward_paged(xa, alone_a, {ia}, offsets({1}))));
    EXPECT_TRUE(torch::equal(stack->forward_paged(xb, shared, {b}, offsets({1})),
                             stack->forward_paged(xb, alone_b, {ib}, offsets({1}))));
    if (step == 0) {
      for (const mha::PagedKVCache& cache : layers_of(shared))
        EXPECT_EQ(cache.num_free_blocks(), 8 - 3);
    }
  }
  // Both in one step: within float32 rounding of each alone (the GEMMs see 2 rows).
  const Tensor x = torch::randn({2, kE});
  const Tensor y = stack->forward_paged(x, shared, {a, b}, offsets({1, 1}));
  EXPECT_TRUE(tensors_close(
      y[0], stack->forward_paged(x.narrow(0, 0, 1), alone_a, {ia}, offsets({1}))[0], 1e-5, 1e-5));
  EXPECT_TRUE(tensors_close(
      y[1], stack->forward_paged(x.narrow(0, 1, 1), alone_b, {ib}, offsets({1}))[0], 1e-5, 1e-5));
  EXPECT_EQ(shared.layer(1).length(a), 11);
  EXPECT_EQ(shared.layer(1).num_free_blocks(), 8 - 5);  // a: 3 blocks, b: 3, the first shared
}

TEST(PagedStackCache, AForkedTailIsCopiedOncePerStepNotOncePerLayer) {
  auto stack = make_causal_stack(3);
  auto shared = stack->make_paged_cache(mha::PagedKVCacheOptions(3, kBlock));
  auto apart = separate_caches(stack, 3);
  torch::NoGradGuard no_grad;
  const int64_t a = shared.layer(0).add_sequence();
  for (auto& cache : apart) cache.add_sequence();
  const Tensor prompt = torch::randn({6, kE});  // blocks 0 and half of 1: 1 block free
  stack->forward_paged(prompt, shared, {a}, offsets({6}));
  layer_by_layer(stack, apart, {a}, prompt, {6});
  const int64_t b = shared.layer(1).fork(a);
  for (auto& cache : apart) ASSERT_EQ(cache.fork(a), b);
  // a copies the shared tail (the one free block), b then writes in place: the step
  // fits only if the copy is counted once for the stack, not once per layer or writer.
  const Tensor x = torch::randn({2, kE});
  EXPECT_TRUE(torch::equal(stack->forward_paged(x, shared, {a, b}, offsets({1, 1})),
                           layer_by_layer(stack, apart, {a, b}, x, {1, 1})));
  for (const mha::PagedKVCache& cache : layers_of(shared)) {
    EXPECT_EQ(cache.num_free_blocks(), 0);
    EXPECT_EQ(cache.length(a), 7);
    EXPECT_EQ(cache.length(b), 7);
  }
}

TEST(PagedStackCache, TheDecoderStackStepEqualsItsLayersCalledOneByOne) {
  auto decoder = make_decoder(2);
  auto self = decoder->make_paged_cache(mha::PagedKVCacheOptions(8, kBlock));
  auto memories = decoder->make_paged_memory_cache(mha::PagedKVCacheOptions(8, kBlock));
  std::vector<mha::PagedKVCache> self_apart, memories_apart;
  for (size_t i = 0; i < 2; ++i) {
    auto& l = *decoder->layers[i]->as<mha::TransformerDecoderLayerImpl>();
    self_apart.emplace_back(*l.self_attn, mha::PagedKVCacheOptions(8, kBlock));
    memories_apart.emplace_back(*l.multihead_attn,
                                mha::PagedKVCacheOptions(8, kBlock).static_kv(true));
  }
  torch::NoGradGuard no_grad;
  std::vector<int64_t> ids;
  for (int r = 0; r < 2; ++r) {
    ids.push_back(self.layer(0).add_sequence());
    memories.layer(0).add_sequence();
    for (auto* caches : {&self_apart, &memories_apart}) {
      for (auto& cache : *caches) cache.add_sequence();
    }
  }
  const Tensor memory = torch::randn({7, kE});  // 3 and 4 positions
  for (int step = 0; step < 3; ++step) {
    const Tensor x = torch::randn({step == 0 ? 5 : 2, kE});
    const std::vector<int64_t> lengths =
        step == 0 ? std::vector<int64_t>{3, 2} : std::vector<int64_t>{1, 1};
    const Tensor m = step == 0 ? memory : Tensor();
    const Tensor m_offsets = step == 0 ? offsets({3, 4}) : Tensor();
    const Tensor y = decoder->forward_paged(x, m, self, memories, ids, offsets(lengths), m_offsets);
    Tensor expected = x;
    for (size_t i = 0; i < 2; ++i) {
      expected = decoder->layers[i]->as<mha::TransformerDecoderLayerImpl>()->forward_paged(
          expected, m, self_apart[i], memories_apart[i], ids, offsets(lengths), m_offsets);
    }
    EXPECT_TRUE(torch::equal(y, expected));
  }
  EXPECT_EQ(memories.layer(1).length(ids[1]), 4);
  EXPECT_EQ(memories.layer(1).num_free_blocks(), 8 - 1 - 1);
  EXPECT_EQ(self.layer(1).length(ids[0]), 5);
  EXPECT_EQ(self.layer(1).num_free_blocks(), 8 - 2 - 1);
}

TEST(PagedStackCache, AContinuousBatchOverADecoderCountsBothKindsOfPools) {
  auto decoder = make_decoder(2);
  mha::ContinuousBatch batch(
      decoder, mha::ContinuousBatchOptions().block_size(kBlock).num_blocks(8).num_memory_blocks(6));
  const int64_t pool = 2 * kBlock * kE * 4;  // one block of keys and values, float32
  EXPECT_EQ(batch.memory_bytes(), 2 * (8 + 6) * pool);
  torch::NoGradGuard no_grad;
  const Tensor memory = torch::randn({5, kE});
  const int64_t a = batch.add(memory);  // 2 memory blocks per layer
  const Tensor x = torch::randn({3, kE});
  const Tensor y = batch.step({{a, x}}).at(a);  // 1 block per layer
  EXPECT_EQ(batch.used_bytes(), 2 * (1 + 2) * pool);
  EXPECT_EQ(batch.num_free_blocks(), 7);
  auto cache = decoder->make_cache();
  EXPECT_TRUE(tensors_close(
      y, decoder->forward_cached(x.unsqueeze(1), memory.unsqueeze(1), cache).squeeze(1), 1e-5,
      1e-5));
  batch.remove(a);
  EXPECT_EQ(batch.used_bytes(), 0);
  EXPECT_EQ(batch.memory_bytes(), 2 * (8 + 6) * pool);
}

TEST(PagedStackCache, AContinuousBatchOverACausalStackCountsItsSelfAttentionPools) {
  auto stack = make_causal_stack(3);
  mha::ContinuousBatch batch(stack, mha::ContinuousBatchOptions().block_size(kBlock).num_blocks(8));
  const int64_t pool = 2 * kBlock * kE * 4;
  EXPECT_EQ(batch.memory_bytes(), 3 * 8 * pool);  // no memory pools
  torch::NoGradGuard no_grad;
  const int64_t a = batch.add(), b = batch.add();
  const Tensor xa = torch::randn({5, kE}), xb = torch::randn({1, kE});
  const auto out = batch.step({{a, xa}, {b, xb}});  // a: 2 blocks, b: 1
  EXPECT_EQ(batch.used_bytes(), 3 * 3 * pool);
  EXPECT_EQ(batch.num_free_blocks(), 5);
  for (const auto& [id, x] : std::vector<std::pair<int64_t, Tensor>>{{a, xa}, {b, xb}}) {
    auto cache = stack->make_cache();
    EXPECT_TRUE(tensors_close(out.at(id), stack->forward_cached(x.unsqueeze(1), cache).squeeze(1),
                              1e-5, 1e-5));
  }
  batch.remove(a);
  EXPECT_EQ(batch.used_bytes(), 3 * 1 * pool);
}

}  // namespace
