// Run by scripts/tp_run.sh: the Gloo group's layout as LibTorch built it, and
// whole checkpoints in (every rank keeps its shard) and out (gathered).

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "mha/state_dict.h"
#include "mha/tensor_parallel.h"
#include "support.h"
#include "tolerances.h"
#include "tp_support.h"

namespace {

using mha::test::bitwise_equal;
using mha::test::tensors_close;
using mha::tp_test::barrier;
using mha::tp_test::group;
using mha::tp_test::shared_path;

// ProcessGroupGloo.hpp compiles here with gloo headers other than LibTorch's
// own. These fields of objects that LibTorch's code built are read at the
// offsets our headers give: a layout that disagrees reads garbage here.
TEST(TensorParallelGroup, GlooLayoutAgreesWithLibTorch) {
  auto* gloo = dynamic_cast<c10d::ProcessGroupGloo*>(group().get());
  ASSERT_NE(gloo, nullptr);
  EXPECT_EQ(gloo->getBackendName(), "gloo");
  EXPECT_EQ(gloo->getRank(), std::atoi(std::getenv("RANK")));
  EXPECT_EQ(gloo->getSize(), std::atoi(std::getenv("WORLD_SIZE")));
  const auto options = gloo->getOptions();
  ASSERT_TRUE(options);
  EXPECT_EQ(options->timeout, mha::tp_test::test_timeout());
  EXPECT_EQ(options->backend, "gloo");
  EXPECT_EQ(options->threads, 2);
  EXPECT_EQ(options->devices.size(), 1u);
  auto ones = torch::ones({3});
  std::vector<torch::Tensor> tensors{ones};
  gloo->allreduce(tensors)->wait();
  EXPECT_TRUE(torch::equal(ones, torch::full({3}, static_cast<float>(gloo->getSize()))));
}

TEST(TensorParallelState, LoadsAWholeCheckpointWithPrefixAndSavesItWhole) {
  const auto options = mha::MultiheadAttentionOptions(16, 4);
  torch::manual_seed(3);
  mha::MultiheadAttention whole(options);
  const std::string in_path = shared_path("whole.pt"), out_path = shared_path("gathered.pt");
  if (group()->getRank() == 0) {
    torch::nn::Module parent;
    parent.register_module("self_attn", whole.ptr());
    mha::save_state_dict(parent, in_path);
  }
  barrier();
  mha::TensorParallelMultiheadAttention tp(options, group());
  tp->load(in_path, mha::LoadOptions().prefix("self_attn."));
  const auto x = torch::randn({4, 2, 16});
  torch::NoGradGuard no_grad;
  whole->train();  // the single process off its fast path, as tp
  const auto tol = mha::support::parity_tolerance(torch::kFloat32);
  EXPECT_TRUE(
      tensors_close(std::get<0>(tp(x, x, x)), std::get<0>(whole(x, x, x)), tol.rtol, tol.atol));

  tp->save(out_path);  // collective; rank 0 writes
  barrier();
  mha::MultiheadAttention reloaded(options);
  mha::load_state_dict(*reloaded, out_path);
  for (const auto& p : whole->named_parameters()) {
    EXPECT_TRUE(bitwise_equal(reloaded->named_parameters()[p.key()], p.value())) << p.key();
  }
  barrier();
  if (group()->getRank() == 0) {
    std::remove(in_path.c_str());
    std::remove(out_path.c_str());
  }
}

TEST(TensorParallelState, PrintsItsShard) {
  mha::TensorParallelMultiheadAttention tp(mha::MultiheadAttentionOptions(8, 4).bias(false),
                                           group());
  std::ostringstream text;
  tp->pretty_print(text);
  EXPECT_EQ(text.str(), "mha::TensorParallelMultiheadAttention(embed_dim=8, num_heads=4, rank=" +
                            std::to_string(group()->getRank()) +
                            ", world_size=" + std::to_string(group()->getSize()) + ", bias=false)");
  EXPECT_EQ(tp->in_proj_weight.sizes(), (std::vector<int64_t>{24 / group()->getSize(), 8}));
  EXPECT_EQ(tp->out_proj->weight.sizes(), (std::vector<int64_t>{8, 8 / group()->getSize()}));
}

}  // namespace
