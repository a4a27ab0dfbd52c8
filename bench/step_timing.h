#pragma once

// What decode_step_profile's modes share: wall time, medians, and the ATen
// ops a callable runs (their count, and each top-level op's time).

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace step_timing {

/// Milliseconds from `start` to now.
double ms_since(std::chrono::steady_clock::time_point start);

/// The median of `values` (the upper one for an even count).
double median(std::vector<double> values);

/// ATen ops (RecordFunction callbacks, nested ones included) that `fn` runs.
int64_t ops_in(const std::function<void()>& fn);

/// One top-level ATen op name's share of a call.
struct OpTime {
  double ms;
  std::string name;
  int64_t calls;
};

/// Total ms and calls per top-level ATen op name over one run of `fn`
/// (nested ops are in their caller's), most time first.
std::vector<OpTime> top_level_op_times(const std::function<void()>& fn);

/// Prints `label`, then the first `count` top-level ops of one run of `fn`
/// with their ms and calls, on one line.
void print_top_level_ops(const std::string& label,
                         const std::function<void()>& fn,
                         size_t count = 10);

/// GB/s of a read-only sweep (sum) over `bytes` of float32: the read
/// bandwidth a step's weights are measured against.
double sweep_gbps(int64_t bytes);

}  // namespace step_timing
