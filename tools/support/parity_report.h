#pragma once

// What the parity suites share: the case list an export script writes next to
// its cases, and the bitwise counts they print after the run.

#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mha {
namespace support {

/// The case names in `dir`/manifest.txt, one a line; blank lines and lines
/// starting with '#' (the torch version) are skipped.
inline std::vector<std::string> read_manifest(const std::string& dir) {
  std::vector<std::string> names;
  std::ifstream manifest(dir + "/manifest.txt");
  for (std::string line; std::getline(manifest, line);) {
    if (!line.empty() && line[0] != '#') names.push_back(line);
  }
  return names;
}

/// Counts of cases compared bit for bit, per dtype, printed after the suite as
/// "<label>: B of N <dtype> cases bitwise equal to Python (<what>)".
class BitwiseReport : public ::testing::Environment {
 public:
  BitwiseReport(std::string label, std::string what)
      : label_(std::move(label)), what_(std::move(what)) {}

  /// Records one compared case.
  void add(const std::string& dtype, const std::string& name, bool bitwise) {
    auto& counts = per_dtype_[dtype];
    counts.first += bitwise ? 1 : 0;
    counts.second += 1;
    if (!bitwise) not_bitwise_.push_back(name);
  }

  /// Records a case where Python raised and mha raised too.
  void add_raise() { ++raises_; }

  void TearDown() override {
    for (const auto& [dtype, counts] : per_dtype_) {
      std::cout << label_ << ": " << counts.first << " of " << counts.second << " " << dtype
                << " cases bitwise equal to Python (" << what_ << ")\n";
    }
    if (raises_ > 0) {
      std::cout << label_ << ": " << raises_ << " cases raise, as they do in Python\n";
    }
    if (!not_bitwise_.empty()) {
      std::cout << label_ << ": not bitwise (within tolerance):";
      for (const auto& name : not_bitwise_) std::cout << " " << name;
      std::cout << "\n";
    }
  }

 private:
  std::string label_, what_;
  std::map<std::string, std::pair<int, int>> per_dtype_;  // dtype -> (bitwise, total)
  std::vector<std::string> not_bitwise_;
  int raises_ = 0;
};

}  // namespace support
}  // namespace mha
