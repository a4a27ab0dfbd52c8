#pragma once

// Snapshots of a module's parameters and buffers, compared bit for bit: the
// check that a failed call or load left the module exactly as it was.

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace mha {
namespace support {

/// Named tensors in the module's order: parameters, then buffers.
using ModuleState = std::vector<std::pair<std::string, torch::Tensor>>;

/// Copies of `module`'s parameters and buffers (recursively, dotted names).
inline ModuleState snapshot(const torch::nn::Module& module) {
  ModuleState state;
  for (const auto& item : module.named_parameters()) {
    state.emplace_back(item.key(), item.value().detach().clone());
  }
  for (const auto& item : module.named_buffers()) {
    state.emplace_back(item.key(), item.value().detach().clone());
  }
  return state;
}

/// Empty when `a` and `b` hold the same names, shapes, dtypes and bytes (NaN
/// payloads included); else the first difference.
inline std::string state_difference(const ModuleState& a, const ModuleState& b) {
  if (a.size() != b.size()) {
    return "the number of tensors changed from " + std::to_string(b.size()) + " to " +
           std::to_string(a.size());
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const auto& [name, x] = a[i];
    const torch::Tensor y = b[i].second;
    std::ostringstream what;
    if (name != b[i].first) {
      what << "tensor " << i << " is '" << name << "', was '" << b[i].first << "'";
    } else if (x.sizes() != y.sizes() || x.scalar_type() != y.scalar_type()) {
      what << name << " changed shape or dtype";
    } else if (x.numel() > 0 &&
               std::memcmp(x.contiguous().data_ptr(), y.contiguous().data_ptr(), x.nbytes()) != 0) {
      what << name << " changed value";
    }
    if (!what.str().empty()) return what.str();
  }
  return "";
}

}  // namespace support
}  // namespace mha
