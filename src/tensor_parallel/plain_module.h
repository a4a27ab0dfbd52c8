#pragma once

// Private: a plain torch::nn::Module holding given tensors under dotted names,
// so that the library's state-dict functions (load_state_dict's checks,
// save_state_dict) work on tensors that no MultiheadAttention holds.

#include <torch/nn/module.h>
#include <torch/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mha {
namespace detail {

/// A module named `name` whose parameters are `tensors` (not requiring
/// grad), in their order, under their dotted names (a child module per
/// component before a dot): its `state_dict` lists them as given.
inline std::shared_ptr<torch::nn::Module> module_holding(
    const std::vector<std::pair<std::string, torch::Tensor>>& tensors, const std::string& name) {
  auto root = std::make_shared<torch::nn::Module>(name);
  for (const auto& [path, tensor] : tensors) {
    torch::nn::Module* owner = root.get();
    std::string rest = path;
    for (auto dot = rest.find('.'); dot != std::string::npos; dot = rest.find('.')) {
      const std::string child = rest.substr(0, dot);
      auto children = owner->named_children();
      const auto* found = children.find(child);
      owner = found ? found->get()
                    : owner->register_module(child, std::make_shared<torch::nn::Module>()).get();
      rest = rest.substr(dot + 1);
    }
    owner->register_parameter(rest, tensor, /*requires_grad=*/false);
  }
  return root;
}

}  // namespace detail
}  // namespace mha
