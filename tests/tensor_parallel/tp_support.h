#pragma once

// What the tensor-parallel test programs share: the process's group (from the
// environment scripts/tp_run.sh sets) and the single-process gradients sliced
// as each rank holds them.

#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "mha/tensor_parallel.h"

namespace mha {
namespace tp_test {

/// Seconds a collective may wait in tests (TP_TEST_TIMEOUT_S, default 30).
inline std::chrono::milliseconds test_timeout() {
  const char* text = std::getenv("TP_TEST_TIMEOUT_S");
  return std::chrono::seconds(text ? std::atoi(text) : 30);
}

/// The process's group, built once from torchrun's environment.
inline const c10::intrusive_ptr<c10d::Backend>& group() {
  static const c10::intrusive_ptr<c10d::Backend> g =
      process_group_from_env(ProcessGroupFromEnvOptions().timeout(test_timeout()));
  return g;
}

/// A file name shared by the ranks of this run (MASTER_PORT is the run's).
inline std::string shared_path(const std::string& name) {
  return "/tmp/mha_tp_" + std::string(std::getenv("MASTER_PORT")) + "_" + name;
}

/// Waits until every rank got here.
inline void barrier() { group()->barrier()->wait(); }

}  // namespace tp_test
}  // namespace mha
