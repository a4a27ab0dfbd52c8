// detail::enter_calling_thread (src/common/calling_thread.h): small ops stay on
// the calling thread while OpenMP's workers sleep (OMP_WAIT_POLICY=PASSIVE),
// only on that thread, and a layer norm, an attention and a prepacked GEMM
// compute the same bits either way.

#include "common/calling_thread.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <mha/layer_norm.h>
#include <mha/multihead_attention.h>
#include <mha/prepack.h>
#include <stdlib.h>
#include <torch/torch.h>

#include <thread>

namespace {

using mha::detail::enter_calling_thread;
using mha::detail::kCallingThreadElements;
using mha::detail::kCallingThreadMultiplyAdds;
using mha::detail::leave_calling_thread;

/// MKL's thread count for this thread (`mkl_get_max_threads`), or -1 where
/// LibTorch carries no MKL.
int mkl_threads() {
  using GetMaxThreads = int (*)();
  static const auto get =
      reinterpret_cast<GetMaxThreads>(dlsym(RTLD_DEFAULT, "MKL_Get_Max_Threads"));
  return get != nullptr ? get() : -1;
}

/// Sets OMP_WAIT_POLICY for the guard's check (the runtime read it at start) and restores it.
class WaitPolicy {
 public:
  explicit WaitPolicy(const char* policy) {
    const char* old = std::getenv("OMP_WAIT_POLICY");
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv("OMP_WAIT_POLICY", policy, 1);
  }
  ~WaitPolicy() {
    if (had_) {
      setenv("OMP_WAIT_POLICY", old_.c_str(), 1);
    } else {
      unsetenv("OMP_WAIT_POLICY");
    }
  }

 private:
  bool had_ = false;
  std::string old_;
};

TEST(CallingThread, SmallOpsRunOnTheCallingThreadWhileWorkersSleep) {
  at::set_num_threads(2);
  const WaitPolicy passive("PASSIVE");
  const int mkl_before = mkl_threads();
  const auto previous = enter_calling_thread(64 * 512);
  EXPECT_EQ(previous.openmp, 2);
  EXPECT_EQ(at::get_num_threads(), 1);
  // MKL's GEMMs, too (SDPA's small GEMMs would each start a region of their own)
  if (mkl_before != -1) {
    EXPECT_EQ(mkl_threads(), 1);
  }
  int other = 0;  // another thread keeps its count
  std::thread([&] { other = at::get_num_threads(); }).join();
  EXPECT_EQ(other, 2);
  leave_calling_thread(previous);
  EXPECT_EQ(at::get_num_threads(), 2);  // restored
  EXPECT_EQ(mkl_threads(), mkl_before);
  EXPECT_EQ(enter_calling_thread(kCallingThreadElements + 1).openmp, 0);
  EXPECT_EQ(at::get_num_threads(), 2);
  const int inside =
      mha::detail::on_calling_thread_if_small(16, [] { return at::get_num_threads(); });
  EXPECT_EQ(inside, 1);
  EXPECT_EQ(at::get_num_threads(), 2);
}

TEST(CallingThread, SpinningWorkersAndOneThreadChangeNothing) {
  at::set_num_threads(2);
  {
    const WaitPolicy active("ACTIVE");
    EXPECT_EQ(enter_calling_thread(16).openmp, 0);
    EXPECT_EQ(at::get_num_threads(), 2);
  }
  at::set_num_threads(1);
  const WaitPolicy passive("passive");
  EXPECT_EQ(enter_calling_thread(16).openmp, 0);
  at::set_num_threads(2);
}

TEST(CallingThread, ALayerNormGivesTheSameBitsOnOneThread) {
  at::set_num_threads(2);
  mha::LayerNorm norm(mha::LayerNormOptions({512}));
  torch::NoGradGuard no_grad;
  norm->weight.normal_();
  norm->bias.normal_();
  const torch::Tensor x = torch::randn({64, 512});  // a decode step of 16 inputs x 4 beams
  torch::Tensor spinning, sleeping;
  {
    const WaitPolicy active("ACTIVE");
    spinning = norm(x);
  }
  {
    const WaitPolicy passive("PASSIVE");
    sleeping = norm(x);
  }
  EXPECT_TRUE(torch::equal(spinning, sleeping));
}

TEST(CallingThread, GemmsAreSmallBelowTheirOwnCount) {
  at::set_num_threads(2);
  const WaitPolicy passive("PASSIVE");
  const auto previous =
      enter_calling_thread(kCallingThreadMultiplyAdds, kCallingThreadMultiplyAdds);
  EXPECT_EQ(previous.openmp, 2);
  leave_calling_thread(previous);
  EXPECT_EQ(enter_calling_thread(kCallingThreadMultiplyAdds + 1, kCallingThreadMultiplyAdds).openmp,
            0);
  EXPECT_EQ(at::get_num_threads(), 2);
}

/// MultiheadAttention(512, 8) prepacked (oneDNN's layout), sequence-first, at
/// 1 and 16 positions: its GEMM of one row (786,432 multiply-adds) and its
/// small attentions run on the calling thread while the workers sleep; the
/// outputs are the bits of the spinning workers' call.
TEST(CallingThread, ASmallAttentionCallGivesTheSameBitsOnOneThread) {
  at::set_num_threads(2);
  torch::manual_seed(0);
  mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(512, 8));
  attn->eval();
  mha::prepack(attn);
  torch::NoGradGuard no_grad;
  for (const int64_t length : {1, 16}) {
    const torch::Tensor x = torch::randn({length, 1, 512});  // (L, N, E)
    torch::Tensor spinning, sleeping;
    {
      const WaitPolicy active("ACTIVE");
      spinning = std::get<0>(attn->forward(x, x, x, torch::Tensor(), false));
    }
    {
      const WaitPolicy passive("PASSIVE");
      sleeping = std::get<0>(attn->forward(x, x, x, torch::Tensor(), false));
    }
    EXPECT_TRUE(torch::equal(spinning, sleeping)) << length << " positions";
  }
}

}  // namespace
