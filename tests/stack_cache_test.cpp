// The stacks' caches as objects: mha::PagedStackCache (one block table for
// every layer's pool: add_sequence, fork, release, length, memory_bytes on
// the object) and mha::TransformerEncoderCache (a causal stack's dense caches,
// reorder for beams). A paged or cached stack step checks each attention call
// once (counted through the "mha::check_paged_call" and "mha::check_cached_call"
// profiler events), all before any cache changes. At E = 512 (the packed GEMMs run).

#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <mha/batching.h>
#include <mha/mha.h>
#include <torch/torch.h>

#include <cstring>
#include <utility>
#include <vector>

#include "stack_fixtures.h"
#include "support.h"

namespace {

using mha::test::tensors_close;
using torch::Tensor;

constexpr int64_t kE = mha::test::kStackE, kHeads = mha::test::kStackHeads, kBlock = 4;

using mha::test::make_causal_stack;
using mha::test::make_decoder;

Tensor offsets(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> cu{0};
  for (const int64_t l : lengths) cu.push_back(cu.back() + l);
  return torch::tensor(cu, torch::kLong);
}

/// Counts, on this thread while it lives, the profiler events named `name`:
/// one per attention call checked ("mha::check_paged_call" for forward_paged,
/// "mha::check_cached_call" for forward_cached).
class CheckCounter {
 public:
  explicit CheckCounter(const char* name) {
    count_ = 0;
    name_ = name;
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback([](const at::RecordFunction& fn)
                                       -> std::unique_ptr<at::ObserverContext> {
          if (std::strcmp(fn.name(), name_) == 0) ++count_;
          return nullptr;
        }).needsInputs(false));
  }
  ~CheckCounter() { at::removeCallback(handle_); }
  int count() const { return count_; }

 private:
  at::CallbackHandle handle_;
  static inline thread_local int count_ = 0;
  static inline thread_local const char* name_ = nullptr;
};

/// A `CheckCounter` of forward_paged's checks.
struct PagedCheckCounter : CheckCounter {
  PagedCheckCounter() : CheckCounter("mha::check_paged_call") {}
};

/// A `CheckCounter` of forward_cached's checks.
struct CachedCheckCounter : CheckCounter {
  CachedCheckCounter() : CheckCounter("mha::check_cached_call") {}
};

TEST(StackCache, APagedStackCacheActsOnEveryLayerOnce) {
  auto stack = make_causal_stack(4);
  mha::PagedStackCache cache = stack->make_paged_cache(mha::PagedKVCacheOptions(6, kBlock));
  EXPECT_EQ(cache.num_layers(), 4);
  EXPECT_EQ(cache.num_blocks(), 6);
  EXPECT_EQ(cache.block_size(), kBlock);
  EXPECT_FALSE(cache.is_static());
  const int64_t block_bytes = 2 * kBlock * kE * 4;  // keys and values, float32
  EXPECT_EQ(cache.memory_bytes(), 4 * 6 * block_bytes);
  EXPECT_EQ(cache.used_bytes(), 0);
  torch::NoGradGuard no_grad;
  const int64_t a = cache.add_sequence();
  stack->forward_paged(torch::randn({6, kE}), cache, {a}, offsets({6}));  // 2 blocks
  EXPECT_EQ(cache.length(a), 6);
  EXPECT_EQ(cache.num_free_blocks(), 4);
  EXPECT_EQ(cache.used_bytes(), 4 * 2 * block_bytes);
  for (int64_t i = 0; i < cache.num_layers(); ++i) EXPECT_EQ(cache.layer(i).length(a), 6);
  const int64_t b = cache.fork(a);  // shares both blocks in every layer
  EXPECT_EQ(cache.sequence_ids(), (std::vector<int64_t>{a, b}));
  EXPECT_EQ(cache.length(b), 6);
  EXPECT_EQ(cache.num_free_blocks(), 4);
  cache.release(a);  // b still holds the blocks
  EXPECT_FALSE(cache.contains(a));
  EXPECT_EQ(cache.num_free_blocks(), 4);
  cache.release(b);
  EXPECT_EQ(cache.num_free_blocks(), 6);
  EXPECT_EQ(cache.used_bytes(), 0);
  MHA_ASSERT_THROWS_WITH(cache.layer(4), "layer index must be in [0, 4), but got 4");
  MHA_ASSERT_THROWS_WITH(cache.release(a), "unknown sequence id");
}

TEST(StackCache, AForkedSequenceDecodesAsItsOwnCopyInEveryLayer) {
  auto stack = make_causal_stack(3);
  auto shared = stack->make_paged_cache(mha::PagedKVCacheOptions(8, kBlock));
  auto alone = stack->make_paged_cache(mha::PagedKVCacheOptions(8, kBlock));
  torch::NoGradGuard no_grad;
  const Tensor prompt = torch::randn({5, kE});
  const int64_t a = shared.add_sequence(), only = alone.add_sequence();
  stack->forward_paged(prompt, shared, {a}, offsets({5}));
  stack->forward_paged(prompt, alone, {only}, offsets({5}));
  const int64_t b = shared.fork(a);
  const Tensor xa = torch::randn({1, kE}), xb = torch::randn({1, kE});
  stack->forward_paged(xa, shared, {a}, offsets({1}));  // a copies the shared tail block
  // b still sees the prompt only: bitwise a sequence that never had a's step.
  EXPECT_TRUE(torch::equal(stack->forward_paged(xb, shared, {b}, offsets({1})),
                           stack->forward_paged(xb, alone, {only}, offsets({1}))));
  EXPECT_EQ(shared.length(a), 6);
  EXPECT_EQ(shared.length(b), 6);
  EXPECT_EQ(shared.num_free_blocks(), 8 - 3);  // the first block shared, a tail each
}

TEST(StackCache, AnOutOfBlocksStepChangesNothingAndFitsAfterARelease) {
  auto stack = make_causal_stack(2);
  auto cache = stack->make_paged_cache(mha::PagedKVCacheOptions(3, kBlock));
  torch::NoGradGuard no_grad;
  const int64_t a = cache.add_sequence(), b = cache.add_sequence();
  stack->forward_paged(torch::randn({8, kE}), cache, {a}, offsets({8}));  // 2 of the 3 blocks
  const Tensor x = torch::randn({5, kE});                                 // b needs 2 blocks
  MHA_ASSERT_THROWS_WITH(stack->forward_paged(x, cache, {b}, offsets({5})),
                         "out of blocks: the call needs 2 new blocks of 4 positions, and 1 of 3");
  EXPECT_EQ(cache.length(b), 0);
  EXPECT_EQ(cache.num_free_blocks(), 1);
  cache.release(a);
  const Tensor y = stack->forward_paged(x, cache, {b}, offsets({5}));
  auto fresh = stack->make_paged_cache(mha::PagedKVCacheOptions(3, kBlock));
  const int64_t c = fresh.add_sequence();
  EXPECT_TRUE(torch::equal(y, stack->forward_paged(x, fresh, {c}, offsets({5}))));
}

TEST(StackCache, APagedDecoderStepChecksEachAttentionCallOnce) {
  constexpr int64_t kLayers = 3;
  auto decoder = make_decoder(kLayers);
  auto self = decoder->make_paged_cache(mha::PagedKVCacheOptions(8, kBlock));
  auto memories = decoder->make_paged_memory_cache(mha::PagedKVCacheOptions(8, kBlock));
  EXPECT_TRUE(memories.is_static());
  torch::NoGradGuard no_grad;
  const int64_t a = self.add_sequence();
  ASSERT_EQ(memories.add_sequence(), a);
  {
    PagedCheckCounter checks;
    decoder->forward_paged(torch::randn({2, kE}), torch::randn({3, kE}), self, memories, {a},
                           offsets({2}), offsets({3}));
    EXPECT_EQ(checks.count(), 2 * kLayers);  // each layer's two attention calls, once each
  }
  {
    PagedCheckCounter checks;
    decoder->forward_paged(torch::randn({1, kE}), Tensor(), self, memories, {a}, offsets({1}));
    EXPECT_EQ(checks.count(), 2 * kLayers);
  }
  auto stack = make_causal_stack(kLayers);
  mha::ContinuousBatch batch(stack, mha::ContinuousBatchOptions().block_size(kBlock).num_blocks(8));
  const int64_t r = batch.add();
  PagedCheckCounter checks;
  batch.step({{r, torch::randn({2, kE})}});
  EXPECT_EQ(checks.count(), kLayers);
}

TEST(StackCache, AReorderedEncoderCacheDecodesTheSelectedBeams) {
  auto stack = make_causal_stack(2);
  torch::NoGradGuard no_grad;
  const Tensor prompt = torch::randn({4, 2, kE});  // (L, N, E)
  const Tensor beams = torch::tensor({1, 0, 1}, torch::kLong);
  mha::TransformerEncoderCache cache = stack->make_cache();
  stack->forward_cached(prompt, cache);
  EXPECT_EQ(cache.batch_size(), 2);
  cache.reorder(beams);
  EXPECT_EQ(cache.batch_size(), 3);
  EXPECT_EQ(cache.length(), 4);
  mha::TransformerEncoderCache expected_cache = stack->make_cache();
  stack->forward_cached(prompt.index_select(1, beams), expected_cache);
  const Tensor step = torch::randn({1, 3, kE});
  EXPECT_TRUE(tensors_close(stack->forward_cached(step, cache),
                            stack->forward_cached(step, expected_cache), 1e-5, 1e-5));
  EXPECT_EQ(cache.memory_bytes(), expected_cache.memory_bytes());
  auto other_stack = make_causal_stack(2);
  auto other = other_stack->make_cache();
  MHA_ASSERT_THROWS_WITH(stack->forward_cached(step, other),
                         "cache must come from this stack's make_cache()");
  cache.clear();
  EXPECT_EQ(cache.length(), 0);
}

TEST(StackCache, ACachedStackStepChecksEachAttentionCallOnce) {
  constexpr int64_t kLayers = 3;
  torch::NoGradGuard no_grad;
  auto stack = make_causal_stack(kLayers);
  auto cache = stack->make_cache();
  {
    CachedCheckCounter checks;
    stack->forward_cached(torch::randn({2, 1, kE}), cache);
    EXPECT_EQ(checks.count(), kLayers);  // each layer's attention call, once
  }
  auto decoder = make_decoder(kLayers);
  auto decoder_cache = decoder->make_cache();
  const Tensor memory = torch::randn({3, 1, kE});
  for (const int64_t length : {2, 1}) {
    CachedCheckCounter checks;
    decoder->forward_cached(torch::randn({length, 1, kE}), memory, decoder_cache);
    EXPECT_EQ(checks.count(), 2 * kLayers);  // each layer's two attention calls, once each
  }
  CachedCheckCounter checks;
  auto& layer = *decoder->layers[0]->as<mha::TransformerDecoderLayerImpl>();
  mha::TransformerDecoderLayerCache layer_cache;
  layer.forward_cached(torch::randn({2, 1, kE}), memory, layer_cache);
  EXPECT_EQ(checks.count(), 2);  // the layer alone checks its two calls once each
}

TEST(StackCache, ACachedStackStepThatOneLayerCannotTakeChangesNoLayer) {
  torch::NoGradGuard no_grad;
  auto stack = make_causal_stack(3);
  auto cache = stack->make_cache();
  stack->forward_cached(torch::randn({2, 1, kE}), cache);
  cache.layer(2).clear();  // layer 2 now holds 0 positions, the others 2
  const Tensor padding = torch::zeros({1, 3}, torch::kBool);  // (N, S): 2 cached + 1 new
  MHA_ASSERT_THROWS_WITH(stack->forward_cached(torch::randn({1, 1, kE}), cache, padding),
                         "Expected key_padded_mask.shape[1] to be 1, but got 3");  // layer 2's
  for (const int64_t i : {0, 1}) EXPECT_EQ(cache.layer(i).length(), 2);
  EXPECT_EQ(cache.layer(2).length(), 0);

  // A decoder layer whose cross-attention cannot take the step: its
  // self-attention, checked and run first, writes nothing either.
  auto decoder = make_decoder(2);
  auto decoder_cache = decoder->make_cache();
  decoder->forward_cached(torch::randn({2, 1, kE}), torch::randn({3, 1, kE}), decoder_cache);
  std::swap(decoder_cache.layer(0).multihead_attn, decoder_cache.layer(1).multihead_attn);
  auto& layer = *decoder->layers[0]->as<mha::TransformerDecoderLayerImpl>();
  MHA_ASSERT_THROWS_WITH(
      layer.forward_cached(torch::randn({1, 1, kE}), Tensor(), decoder_cache.layer(0)),
      "the cache was filled by another module");
  EXPECT_EQ(decoder_cache.layer(0).self_attn.length(), 2);
}

}  // namespace
