// decode_step_profile's timing helpers (step_timing.h).

#include "step_timing.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>

namespace step_timing {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

namespace {
std::atomic<int64_t> ops_seen{0};
}  // namespace

int64_t ops_in(const std::function<void()>& fn) {
  ops_seen = 0;
  const auto handle = at::addThreadLocalCallback(at::RecordFunctionCallback(
      [](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
        ++ops_seen;
        return nullptr;
      }));
  fn();
  at::removeCallback(handle);
  return ops_seen.load();
}

std::vector<OpTime> top_level_op_times(const std::function<void()>& fn) {
  struct Timing {
    std::map<std::string, double> ms;
    std::map<std::string, int64_t> calls;
    std::vector<Clock::time_point> starts;
  };
  static thread_local Timing* timing = nullptr;
  Timing t;
  timing = &t;
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(
          [](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
            timing->starts.push_back(Clock::now());
            return nullptr;
          },
          [](const at::RecordFunction& op, at::ObserverContext*) {
            const double ms = ms_since(timing->starts.back());
            timing->starts.pop_back();
            if (timing->starts.empty()) {
              timing->ms[op.name()] += ms;
              ++timing->calls[op.name()];
            }
          })
          .scopes({at::RecordScope::FUNCTION}));
  fn();
  at::removeCallback(handle);
  timing = nullptr;
  std::vector<OpTime> sorted;
  for (const auto& [name, ms] : t.ms) sorted.push_back({ms, name, t.calls[name]});
  std::sort(sorted.begin(), sorted.end(),
            [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
  return sorted;
}

void print_top_level_ops(const std::string& label, const std::function<void()>& fn, size_t count) {
  const auto ops = top_level_op_times(fn);
  std::printf("  %s top-level ops by time (calls):", label.c_str());
  for (size_t i = 0; i < std::min(count, ops.size()); ++i) {
    std::printf(" %s %.3f ms (%ld);", ops[i].name.c_str(), ops[i].ms,
                static_cast<long>(ops[i].calls));
  }
  std::printf("\n");
}

double sweep_gbps(int64_t bytes) {
  const at::Tensor buffer = at::rand({bytes / 4});
  std::vector<double> times;
  for (int i = 0; i < 21; ++i) {
    const auto start = Clock::now();
    buffer.sum().item<float>();
    times.push_back(ms_since(start));
  }
  return static_cast<double>(bytes) / median(times) / 1e6;
}

}  // namespace step_timing
