// Run by scripts/tp_run.sh with 2 ranks and a timeout of seconds: a fault on
// one rank must make every surviving rank fail with a clear c10::Error within
// the group's timeout, not hang. Usage: mha_tp_fault_test MODE, MODE one of
//   dead-rank     rank 1 dies (std::_Exit, no cleanup) instead of its 2nd forward
//   world-size    rank 1 is started with WORLD_SIZE=3
//   bad-shape     rank 1's in_proj_weight has the wrong shape
// Each surviving rank prints what it caught and exits 0 when the error is the
// expected one (and came within the time bound), 1 otherwise.

#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include "mha/tensor_parallel.h"
#include "tp_support.h"

namespace {

using Clock = std::chrono::steady_clock;

/// Runs `body`; passes when it throws a c10::Error containing `expected`
/// within `bound`.
template <typename Body>
int expect_error(Body body, const std::string& expected, std::chrono::seconds bound) {
  const auto start = Clock::now();
  try {
    body();
  } catch (const c10::Error& e) {
    const auto took = std::chrono::duration<double>(Clock::now() - start).count();
    const std::string message = e.what_without_backtrace();
    std::cout << "caught after " << took << " s: " << message << std::endl;
    if (message.find(expected) == std::string::npos) {
      std::cout << "FAIL: the message does not contain \"" << expected << "\"" << std::endl;
      return 1;
    }
    if (took > static_cast<double>(bound.count())) {
      std::cout << "FAIL: took longer than " << bound.count() << " s" << std::endl;
      return 1;
    }
    std::cout << "PASS" << std::endl;
    return 0;
  }
  std::cout << "FAIL: no error (expected one containing \"" << expected << "\")" << std::endl;
  return 1;
}

int dead_rank() {
  const auto& group = mha::tp_test::group();
  mha::TensorParallelMultiheadAttention tp(mha::MultiheadAttentionOptions(16, 4), group);
  const auto x = torch::randn({5, 2, 16});
  tp(x, x, x);  // validates and runs once on both ranks
  if (group->getRank() == 1) {
    std::cout << "rank 1: dying mid-run" << std::endl;
    std::_Exit(0);  // exit code 0: the launcher judges the survivors
  }
  const auto bound =
      std::chrono::duration_cast<std::chrono::seconds>(mha::tp_test::test_timeout()) +
      std::chrono::seconds(10);
  return expect_error([&] { tp(x, x, x); }, "failed on rank 0 of 2", bound);
}

int world_size() {
  if (std::string(std::getenv("RANK")) == "1") {
    setenv("WORLD_SIZE", "3", /*overwrite=*/1);
  }
  return expect_error([] { mha::tp_test::group(); },
                      "every rank must be started with the same world size",
                      std::chrono::seconds(10));
}

int bad_shape() {
  const auto& group = mha::tp_test::group();
  mha::TensorParallelMultiheadAttention tp(mha::MultiheadAttentionOptions(16, 4), group);
  if (group->getRank() == 1) {
    torch::NoGradGuard no_grad;
    tp->in_proj_weight.set_(torch::zeros({12, 16}));  // the whole module's shape / 4
  }
  const auto x = torch::randn({5, 2, 16});
  return expect_error([&] { tp(x, x, x); }, "rank 1's parameters do not have their shard shapes",
                      std::chrono::seconds(10));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "dead-rank") return dead_rank();
  if (mode == "world-size") return world_size();
  if (mode == "bad-shape") return bad_shape();
  std::cerr << "usage: " << argv[0] << " dead-rank|world-size|bad-shape" << std::endl;
  return 2;
}
