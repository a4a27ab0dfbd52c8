// Large intermediates reused within one stack call (src/common/reused_buffers.h):
// a freed block handed out again by exact size, tensors that outlive their
// scope or die on another thread, nested scopes; and a BERT-shaped encoder
// stack in panels whose layers reuse their blocks with the bits of the same
// layers called one by one outside any scope.

#include "common/reused_buffers.h"

#include <gtest/gtest.h>
#include <mha/mha.h>
#include <torch/torch.h>

#include <thread>
#include <utility>

#include "support.h"

namespace mha {
namespace {

using detail::empty_reused;
using detail::ReusedBuffers;
using test::bitwise_equal;
using torch::Tensor;

const auto kFloat = torch::TensorOptions().dtype(torch::kFloat);

TEST(ReusedBuffers, AScopeHandsAFreedBlockOfTheSameSizeOutAgain) {
  const ReusedBuffers scope;
  Tensor a = empty_reused({1024, 768}, kFloat);  // 3 MB
  const void* block = a.data_ptr();
  a.reset();
  const Tensor b = empty_reused({768, 1024}, kFloat);  // the same bytes
  EXPECT_EQ(b.data_ptr(), block);
  EXPECT_EQ(ReusedBuffers::reuses(), 1);
  EXPECT_EQ(b.sizes(), (std::vector<int64_t>{768, 1024}));
  EXPECT_TRUE(b.is_contiguous());

  const Tensor other = empty_reused({1024, 769}, kFloat);  // another size: a new block
  Tensor small = empty_reused({16, 16}, kFloat);           // under kReusedBufferBytes: at::empty
  small.reset();
  const Tensor small_again = empty_reused({16, 16}, kFloat);
  EXPECT_EQ(ReusedBuffers::reuses(), 1);
  EXPECT_NE(other.data_ptr(), block);
}

TEST(ReusedBuffers, WithoutAScopeNothingIsKept) {
  EXPECT_EQ(ReusedBuffers::reuses(), 0);
  Tensor a = empty_reused({1024, 768}, kFloat);
  a.reset();
  const Tensor b = empty_reused({1024, 768}, kFloat);
  EXPECT_EQ(ReusedBuffers::reuses(), 0);
  EXPECT_EQ(b.numel(), 1024 * 768);
}

TEST(ReusedBuffers, ATensorOutlivesItsScopeAndResizesAsAnyOther) {
  Tensor kept;
  {
    const ReusedBuffers scope;
    kept = empty_reused({512, 1024}, kFloat).fill_(2.5f);  // 2 MB
  }
  EXPECT_EQ(kept.sum().item<double>(), 2.5 * 512 * 1024);
  kept.resize_({1024, 1024});  // the storage grows (LibTorch's allocator), the values kept
  EXPECT_EQ(kept.narrow(0, 0, 512).sum().item<double>(), 2.5 * 512 * 1024);
}

TEST(ReusedBuffers, AnotherThreadMayFreeABlockWhileTheScopeLives) {
  const ReusedBuffers scope;
  Tensor a = empty_reused({1024, 768}, kFloat);
  const void* block = a.data_ptr();
  std::thread([moved = std::move(a)]() mutable { moved.reset(); }).join();
  const Tensor b = empty_reused({1024, 768}, kFloat);
  EXPECT_EQ(b.data_ptr(), block);
  EXPECT_EQ(ReusedBuffers::reuses(), 1);
}

TEST(ReusedBuffers, NestedScopesShareTheOutermostPool) {
  const ReusedBuffers outer;
  const void* block = nullptr;
  {
    const ReusedBuffers inner;
    block = empty_reused({1024, 768}, kFloat).data_ptr();  // freed at once
  }
  const Tensor b = empty_reused({1024, 768}, kFloat);
  EXPECT_EQ(b.data_ptr(), block);
  EXPECT_EQ(ReusedBuffers::reuses(), 1);
}

TEST(ReusedBuffers, AnEncoderStackInPanelsReusesItsBlocksWithTheSameBits) {
  // BERT-base's layer shape (768 wide, 12 heads, FFN 3072, GELU), 2 layers,
  // 2 x 96 tokens: the (192, 2304) projection and the (192, 3072) feed-forward
  // outputs are over kReusedBufferBytes (the (192, 768) ones are not).
  torch::manual_seed(7);
  TransformerEncoder stack(
      TransformerEncoderOptions(TransformerEncoderLayer(TransformerEncoderLayerOptions(768, 12)
                                                            .dim_feedforward(3072)
                                                            .activation(torch::kGELU)
                                                            .batch_first(true)),
                                2));
  stack->eval();
  prepack(stack, PrepackOptions().panels(true));
  const Tensor x = torch::randn({2, 96, 768});  // (N, L, E)
  const c10::InferenceMode inference;
  Tensor by_layer = x;
  for (const auto& layer : *stack->layers) {
    by_layer = layer->as<TransformerEncoderLayerImpl>()->forward(by_layer);
  }
  EXPECT_EQ(ReusedBuffers::reuses(), 0);
  const ReusedBuffers outer;  // the stack's scope nests in it: its count stays readable
  const Tensor out = stack(x);
  EXPECT_GE(ReusedBuffers::reuses(), 2) << "the second layer's projection and feed-forward";
  EXPECT_TRUE(bitwise_equal(out, by_layer));
}

}  // namespace
}  // namespace mha
