// Run by scripts/tp_run.sh: how each rank initialises its shard. exact_init
// gives the single-process module's slices and leaves the global generator
// where that module leaves it; the default draws the shard alone, with the
// bounds of the whole tensors, differently on each rank and reproducibly.

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "mha/tensor_parallel.h"
#include "support.h"
#include "tp_support.h"

namespace {

using mha::test::bitwise_equal;
using mha::tp_test::group;
using torch::Tensor;

/// Every rank's `local` (same shape), in rank order.
std::vector<Tensor> all_ranks(const Tensor& local) {
  std::vector<Tensor> inputs{local.detach().contiguous()};
  std::vector<std::vector<Tensor>> outputs(1);
  for (int r = 0; r < group()->getSize(); ++r) outputs[0].push_back(torch::empty_like(inputs[0]));
  group()->allgather(outputs, inputs)->wait();
  return outputs[0];
}

// E = 384: the exact init draws in_proj_weight's 1152 rows in blocks of 682,
// so on 2 ranks a block boundary cuts one of rank 1's boxes.
std::vector<mha::MultiheadAttentionOptions> exact_cases() {
  return {mha::MultiheadAttentionOptions(384, 4),
          mha::MultiheadAttentionOptions(384, 4).kdim(100).vdim(200).add_bias_kv(true),
          mha::MultiheadAttentionOptions(64, 4).bias(false)};
}

TEST(TensorParallelInit, ExactInitIsTheSingleProcessModulesSlices) {
  for (const auto& options : exact_cases()) {
    torch::manual_seed(11);
    mha::MultiheadAttention whole(options);
    const Tensor after_whole = torch::rand({4});
    torch::manual_seed(11);
    mha::TensorParallelMultiheadAttention tp(options, group(),
                                             mha::TensorParallelOptions().exact_init(true));
    EXPECT_TRUE(torch::equal(torch::rand({4}), after_whole)) << "the global generator's state";
    mha::TensorParallelMultiheadAttention expected(options, group());
    expected->load_shard_from(*whole);
    for (const auto& p : expected->named_parameters()) {
      EXPECT_TRUE(bitwise_equal(tp->named_parameters()[p.key()], p.value()))
          << p.key() << " (embed_dim " << options.embed_dim() << ")";
    }
  }
}

TEST(TensorParallelInit, DefaultInitUsesTheWholeTensorsBounds) {
  const int64_t E = 256;
  torch::manual_seed(3);
  mha::TensorParallelMultiheadAttention tp(mha::MultiheadAttentionOptions(E, 4).add_bias_kv(true),
                                           group());
  // xavier_uniform_ of (3E, E): fans E and 3E; Linear's kaiming_uniform_(a=sqrt(5))
  // of (E, E): bound 1/sqrt(E). A shard's own fans would give larger bounds.
  const double in_bound = std::sqrt(6.0 / (E + 3 * E)), out_bound = 1 / std::sqrt(double(E));
  const double in_max = tp->in_proj_weight.abs().max().item<double>();
  const double out_max = tp->out_proj->weight.abs().max().item<double>();
  EXPECT_LE(in_max, in_bound);
  EXPECT_GE(in_max, 0.99 * in_bound);
  EXPECT_LE(out_max, out_bound);
  EXPECT_GE(out_max, 0.99 * out_bound);
  // xavier_normal_ of (1, 1, E): fans E and E, std 1/sqrt(E), over E/p draws.
  const double std = torch::cat({tp->bias_k.flatten(), tp->bias_v.flatten()}).std().item<double>();
  EXPECT_NEAR(std, 1 / std::sqrt(double(E)), 0.25 / std::sqrt(double(E)));
  EXPECT_TRUE(torch::equal(tp->in_proj_bias, torch::zeros_like(tp->in_proj_bias)));
  EXPECT_TRUE(torch::equal(tp->out_proj->bias, torch::zeros_like(tp->out_proj->bias)));
}

TEST(TensorParallelInit, DefaultInitDiffersByRankAndRepeatsFromASeed) {
  const auto options = mha::MultiheadAttentionOptions(32, 4);
  torch::manual_seed(5);
  mha::TensorParallelMultiheadAttention first(options, group());
  const Tensor after_first = torch::rand({4});
  torch::manual_seed(5);
  {  // construction takes one 64-bit draw of the global generator
    auto global = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(global.mutex());
    global.get<at::CPUGeneratorImpl>()->random64();
  }
  EXPECT_TRUE(torch::equal(torch::rand({4}), after_first));
  torch::manual_seed(5);
  mha::TensorParallelMultiheadAttention again(options, group());
  for (const auto& p : first->named_parameters()) {
    EXPECT_TRUE(bitwise_equal(again->named_parameters()[p.key()], p.value())) << p.key();
  }
  const auto shards = all_ranks(first->in_proj_weight);
  for (int r = 0; r < group()->getSize(); ++r) {
    if (r != group()->getRank()) {
      EXPECT_FALSE(torch::equal(shards[r], first->in_proj_weight)) << "rank " << r;
    }
  }
}

}  // namespace
