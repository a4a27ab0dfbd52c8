// Serving state that holds: each test is a way a server's state went wrong
// before, at the sizes people serve (E = 512: the packed GEMMs run): copy on
// write counted once per shared block, a pool checked against the module's
// dtype, a decoder-only batch's byte count, a stack's paged step that changes
// no layer when one of its tables cannot take it, invariance refused once the weights
// turn int8, kernel-switch guards that act on their own thread only, and int8
// weights that survive LibTorch's own torch::save / torch::load.

#include <gtest/gtest.h>
#include <mha/batching.h>
#include <mha/mha.h>
#include <torch/torch.h>

#include <sstream>
#include <thread>
#include <vector>

#include "support.h"

namespace {

using mha::test::tensors_close;
using torch::Tensor;

constexpr int64_t kE = 512, kHeads = 8;

mha::MultiheadAttention make_attention() {
  torch::manual_seed(0);
  mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(kE, kHeads).batch_first(true));
  attn->eval();
  return attn;
}

mha::TransformerEncoder make_causal_stack(int64_t layers) {
  torch::manual_seed(0);
  mha::TransformerEncoder stack(
      mha::TransformerEncoderOptions(
          mha::TransformerEncoderLayer(
              mha::TransformerEncoderLayerOptions(kE, kHeads).dim_feedforward(2048).dropout(0.0)),
          layers)
          .enable_nested_tensor(false));
  stack->eval();
  return stack;
}

Tensor offsets(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> cu{0};
  for (const int64_t l : lengths) cu.push_back(cu.back() + l);
  return torch::tensor(cu, torch::kLong);
}

/// forward_cached of one sequence alone: (L, E) -> (L, E).
Tensor alone(mha::MultiheadAttention& attn, mha::KVCache& cache, const Tensor& x) {
  const Tensor batched = x.unsqueeze(0);
  return std::get<0>(attn->forward_cached(batched, batched, batched, cache)).squeeze(0);
}

TEST(ServingState, AForkedTailIsCopiedOnceNotOncePerWriter) {
  auto attn = make_attention();
  mha::PagedKVCache cache(*attn, mha::PagedKVCacheOptions(3, 4));
  torch::NoGradGuard no_grad;
  auto a_alone = mha::KVCache::self_attention(), b_alone = mha::KVCache::self_attention();
  const int64_t a = cache.add_sequence();
  const Tensor prompt = torch::randn({6, kE});
  attn->forward_paged(prompt, prompt, prompt, cache, {a}, offsets({6}));
  alone(attn, a_alone, prompt);
  alone(attn, b_alone, prompt);
  const int64_t b = cache.fork(a);
  ASSERT_EQ(cache.num_free_blocks(), 1);
  // a copies the shared tail block; b, then its only holder, writes in place.
  const Tensor x = torch::randn({2, kE});
  const Tensor out = std::get<0>(attn->forward_paged(x, x, x, cache, {a, b}, offsets({1, 1})));
  EXPECT_EQ(cache.num_free_blocks(), 0);
  EXPECT_TRUE(tensors_close(out[0], alone(attn, a_alone, x.narrow(0, 0, 1))[0], 1e-5, 1e-5));
  EXPECT_TRUE(tensors_close(out[1], alone(attn, b_alone, x.narrow(0, 1, 1))[0], 1e-5, 1e-5));
}

TEST(ServingState, APoolOfAnotherDtypeIsAnErrorThatChangesNoSequence) {
  auto attn = make_attention();
  mha::PagedKVCache cache(*attn, mha::PagedKVCacheOptions(4, 4));
  const int64_t a = cache.add_sequence();
  attn->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  const Tensor x = torch::randn({2, kE}, torch::kDouble);
  MHA_ASSERT_THROWS_WITH(attn->forward_paged(x, x, x, cache, {a}, offsets({2})),
                         "expected the cache's pool of dtype Float on cpu to match the module's "
                         "Double on cpu");
  EXPECT_EQ(cache.length(a), 0);
  EXPECT_EQ(cache.num_free_blocks(), 4);
}

TEST(ServingState, ADecoderOnlyBatchCountsItsSelfAttentionPools) {
  auto stack = make_causal_stack(2);
  mha::ContinuousBatch batch(stack, mha::ContinuousBatchOptions().block_size(4).num_blocks(8));
  // 2 layers x (keys + values) x 8 blocks x 4 positions x E float32
  EXPECT_EQ(batch.memory_bytes(), 2 * 2 * 8 * 4 * kE * 4);
  EXPECT_EQ(batch.used_bytes(), 0);
}

TEST(ServingState, AStackStepThatOneTableCannotTakeChangesNoLayer) {
  // A decoder stack step writes two tables: the self-attention's (room for the
  // step) and the memories' (1 block, the memory needs 2): nothing changes.
  torch::manual_seed(0);
  mha::TransformerDecoder decoder(mha::TransformerDecoderOptions(
      mha::TransformerDecoderLayer(
          mha::TransformerDecoderLayerOptions(kE, kHeads).dim_feedforward(2048).dropout(0.0)),
      2));
  decoder->eval();
  auto self = decoder->make_paged_cache(mha::PagedKVCacheOptions(4, 4));
  auto memories = decoder->make_paged_memory_cache(mha::PagedKVCacheOptions(1, 4));
  const int64_t id = self.add_sequence();
  ASSERT_EQ(memories.add_sequence(), id);
  torch::NoGradGuard no_grad;
  const Tensor x = torch::randn({3, kE}), memory = torch::randn({6, kE});  // 6 rows: 2 blocks
  MHA_ASSERT_THROWS_WITH(
      decoder->forward_paged(x, memory, self, memories, {id}, offsets({3}), offsets({6})),
      "out of blocks: the call needs 2 new blocks of 4 positions, and 1 of 1");
  EXPECT_EQ(self.length(id), 0);
  EXPECT_EQ(self.num_free_blocks(), 4);
  EXPECT_EQ(memories.length(id), 0);
  EXPECT_EQ(memories.num_free_blocks(), 1);
}

TEST(ServingState, InvarianceIsRefusedOnceTheWeightsTurnInt8) {
  auto stack = make_causal_stack(1);
  mha::ContinuousBatch batch(stack, mha::ContinuousBatchOptions().batch_invariant(true));
  const int64_t id = batch.add();
  torch::NoGradGuard no_grad;
  batch.step({{id, torch::randn({2, kE})}});
  mha::quantize_dynamic(stack);
  MHA_ASSERT_THROWS_WITH(batch.step({{id, torch::randn({1, kE})}}),
                         "ContinuousBatch::step: the batch was made with "
                         "ContinuousBatchOptions::batch_invariant(true)");
  EXPECT_EQ(batch.length(id), 2);
}

TEST(ServingState, KernelGuardsActOnTheirOwnThreadOnly) {
  ASSERT_FALSE(mha::python_kernels_enabled());
  bool seen_by_other = true, fast_path_seen_by_other = false;
  {
    const mha::PythonKernelsGuard exact;
    const mha::FastPathGuard no_fast_path(false);
    EXPECT_TRUE(mha::python_kernels_enabled());
    EXPECT_FALSE(mha::get_fastpath_enabled());
    std::thread other([&] {
      seen_by_other = mha::python_kernels_enabled();
      fast_path_seen_by_other = mha::get_fastpath_enabled();
    });
    other.join();
  }
  EXPECT_FALSE(seen_by_other);
  EXPECT_TRUE(fast_path_seen_by_other);
  EXPECT_FALSE(mha::python_kernels_enabled());
  EXPECT_TRUE(mha::get_fastpath_enabled());
  // Two threads with guards of their own: one ending leaves the other's in force.
  std::atomic<int> stage{0};
  bool b_still_exact = false;
  std::thread a([&] {
    const mha::PythonKernelsGuard exact;
    stage = 1;
    while (stage != 2) std::this_thread::yield();
  });
  std::thread b([&] {
    while (stage != 1) std::this_thread::yield();
    const mha::PythonKernelsGuard exact;
    stage = 2;
    a.join();
    b_still_exact = mha::python_kernels_enabled();
  });
  b.join();
  EXPECT_TRUE(b_still_exact);
  // The process-wide switch still reaches every thread without a guard.
  mha::set_python_kernels(true);
  std::thread reader([&] { seen_by_other = mha::python_kernels_enabled(); });
  reader.join();
  mha::set_python_kernels(false);
  EXPECT_TRUE(seen_by_other);
}

/// A quantized module's output on a fixed input: (1, 16, E) -> (1, 16, E).
Tensor attention_output(mha::MultiheadAttention& attn) {
  torch::manual_seed(7);
  const Tensor x = torch::randn({1, 16, kE});
  torch::NoGradGuard no_grad;
  return std::get<0>(attn->forward(x, x, x, {}, false));
}

mha::MultiheadAttention make_quantized_attention(uint64_t seed) {
  torch::manual_seed(seed);
  mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(kE, kHeads).batch_first(true));
  attn->eval();
  mha::quantize_dynamic(attn);
  return attn;
}

TEST(ServingState, Int8WeightsSurviveTorchSaveAndLoad) {
  auto saved = make_quantized_attention(1), loaded = make_quantized_attention(2);
  const Tensor expected = attention_output(saved);
  ASSERT_FALSE(attention_output(loaded).equal(expected));
  std::stringstream archive;
  torch::save(saved, archive);
  torch::load(loaded, archive);
  EXPECT_TRUE(mha::test::bitwise_equal(attention_output(loaded), expected));

  // A layer with its feed-forward linears converted too.
  auto layer = [](uint64_t seed) {
    torch::manual_seed(seed);
    mha::TransformerEncoderLayer l(
        mha::TransformerEncoderLayerOptions(kE, kHeads).dim_feedforward(2048).batch_first(true));
    l->eval();
    mha::quantize_dynamic(l);
    return l;
  };
  auto saved_layer = layer(3), loaded_layer = layer(4);
  const Tensor x = torch::randn({1, 16, kE});
  torch::NoGradGuard no_grad;
  std::stringstream layer_archive;
  torch::save(saved_layer, layer_archive);
  torch::load(loaded_layer, layer_archive);
  EXPECT_TRUE(mha::test::bitwise_equal(loaded_layer->forward(x), saved_layer->forward(x)));
}

TEST(ServingState, AQuantizedModuleClonesBitForBit) {
  auto attn = make_quantized_attention(1);
  const Tensor expected = attention_output(attn);
  auto copy = std::dynamic_pointer_cast<mha::MultiheadAttentionImpl>(attn->clone());
  ASSERT_NE(copy, nullptr);
  mha::MultiheadAttention cloned(copy);
  EXPECT_TRUE(mha::test::bitwise_equal(attention_output(cloned), expected));
  EXPECT_TRUE(mha::is_quantized(*cloned));
  // Independent: loading other int8 weights into the clone leaves the original alone.
  std::stringstream other;
  torch::save(make_quantized_attention(2), other);
  torch::load(cloned, other);
  EXPECT_FALSE(attention_output(cloned).equal(expected));
  EXPECT_TRUE(mha::test::bitwise_equal(attention_output(attn), expected));

  // A stack, its layers' linears converted too.
  torch::manual_seed(5);
  mha::TransformerEncoder stack(mha::TransformerEncoderOptions(
      mha::TransformerEncoderLayer(
          mha::TransformerEncoderLayerOptions(kE, kHeads).dim_feedforward(2048).batch_first(true)),
      2));
  stack->eval();
  mha::quantize_dynamic(stack);
  auto stack_copy = std::dynamic_pointer_cast<mha::TransformerEncoderImpl>(stack->clone());
  const Tensor x = torch::randn({1, 16, kE});
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(mha::test::bitwise_equal(stack_copy->forward(x), stack->forward(x)));
}

TEST(ServingState, AnInt8ArchiveIntoAFloatModuleIsAnErrorThatChangesNothing) {
  auto quantized = make_quantized_attention(1);
  torch::manual_seed(2);
  mha::MultiheadAttention float_attn(mha::MultiheadAttentionOptions(kE, kHeads).batch_first(true));
  float_attn->eval();
  const Tensor before = float_attn->in_proj_weight.clone();
  std::stringstream int8_archive;
  torch::save(quantized, int8_archive);
  MHA_ASSERT_THROWS_WITH(torch::load(float_attn, int8_archive),
                         "torch::load: the archive holds in_proj_weight as int8 "
                         "(mha::quantize_dynamic) weights, but this module's are float");
  EXPECT_TRUE(float_attn->in_proj_weight.equal(before));
  std::stringstream float_archive;
  torch::save(float_attn, float_archive);
  const Tensor quantized_before = attention_output(quantized);
  MHA_ASSERT_THROWS_WITH(torch::load(quantized, float_archive),
                         "torch::load: the archive holds float weights for in_proj_weight");
  EXPECT_TRUE(mha::test::bitwise_equal(attention_output(quantized), quantized_before));
}

}  // namespace
