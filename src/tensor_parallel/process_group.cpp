// process_group_from_env: a Gloo process group from torchrun's environment,
// with the store keys of Python's default group. Uses only c10d's classes
// (TCPStore, PrefixStore, ProcessGroupGloo and its Options): gloo's own
// classes, whose layout differs between the headers found here and LibTorch's
// build, are never touched.

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "mha/tensor_parallel.h"

namespace mha {

namespace {

std::string env_string(const char* name) {
  const char* value = std::getenv(name);
  TORCH_CHECK_VALUE(value != nullptr && *value != '\0',
                    fmt::format("process_group_from_env: the environment variable {} is not set "
                                "(torchrun and scripts/tp_run.sh set MASTER_ADDR, MASTER_PORT, "
                                "RANK and WORLD_SIZE)",
                                name));
  return value;
}

int64_t env_int(const char* name, int64_t min, int64_t max) {
  const std::string text = env_string(name);
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  TORCH_CHECK_VALUE(*end == '\0' && value >= min && value <= max,
                    fmt::format("process_group_from_env: {}={} is not an integer in [{}, {}]", name,
                                text, min, max));
  return value;
}

/// Every rank's WORLD_SIZE through the store, so that a rank started with
/// another one fails here, naming both, instead of timing out in the rendezvous.
void check_world_sizes(c10d::Store& store, int64_t rank, int64_t world_size) {
  const std::string prefix = "mha_tp/world_size/";
  const std::string mine = std::to_string(world_size);
  store.set(prefix + std::to_string(rank), std::vector<uint8_t>(mine.begin(), mine.end()));
  for (int64_t r = 0; r < world_size; ++r) {
    const std::vector<uint8_t> theirs = store.get(prefix + std::to_string(r));
    TORCH_CHECK(std::string(theirs.begin(), theirs.end()) == mine,
                fmt::format("process_group_from_env: rank {} has WORLD_SIZE={} but rank {} has "
                            "WORLD_SIZE={}: every rank must be started with the same world size",
                            rank, mine, r, std::string(theirs.begin(), theirs.end())));
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Backend> process_group_from_env(
    const ProcessGroupFromEnvOptions& options) {
  const std::string master_addr = env_string("MASTER_ADDR");
  const auto master_port = static_cast<uint16_t>(env_int("MASTER_PORT", 1, 65535));
  const int64_t world_size = env_int("WORLD_SIZE", 1, 1 << 20);
  const int64_t rank = env_int("RANK", 0, world_size - 1);

  c10d::TCPStoreOptions store_options;
  store_options.port = master_port;
  store_options.isServer = rank == 0;
  store_options.numWorkers = static_cast<size_t>(world_size);
  store_options.waitWorkers = true;  // Python's server waits for its workers to join
  store_options.timeout = options.timeout();
  auto store = c10::make_intrusive<c10d::TCPStore>(master_addr, store_options);
  if (options.check_world_size()) {
    check_world_sizes(*store, rank, world_size);
  }
  // Python's default group nests its keys: PrefixStore("default_pg") (in
  // init_process_group), then the group name "0/", then the device "cpu/".
  c10::intrusive_ptr<c10d::Store> keys =
      c10::make_intrusive<c10d::PrefixStore>("default_pg", store);
  keys = c10::make_intrusive<c10d::PrefixStore>("0/", keys);
  keys = c10::make_intrusive<c10d::PrefixStore>("cpu/", keys);

  auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout());
  gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  return c10::make_intrusive<c10d::ProcessGroupGloo>(keys, static_cast<int>(rank),
                                                     static_cast<int>(world_size), gloo_options);
}

}  // namespace mha
