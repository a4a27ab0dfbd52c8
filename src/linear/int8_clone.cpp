#include "linear/int8_clone.h"

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "linear/int8_linear.h"

namespace mha {
namespace detail {

bool holds_int8(const torch::nn::Module& module) {
  for (const auto& child : module.named_children()) {
    if (std::dynamic_pointer_cast<Int8WeightImpl>(child.value()) || holds_int8(*child.value())) {
      return true;
    }
  }
  return false;
}

void copy_with_int8(const torch::nn::Module& original, torch::nn::Module& copy) {
  std::map<std::string, std::shared_ptr<torch::nn::Module>> copies;
  for (const auto& m : copy.named_modules("", /*include_self=*/true)) copies[m.key()] = m.value();
  torch::NoGradGuard no_grad;
  for (const auto& m : original.named_modules("", /*include_self=*/true)) {
    const auto found = copies.find(m.key());
    if (found == copies.end()) continue;  // under an int8 child: nothing of its own
    torch::nn::Module& target = *found->second;
    for (const auto& child : m.value()->named_children()) {
      const auto int8 = std::dynamic_pointer_cast<Int8WeightImpl>(child.value());
      if (!int8 || target.named_children().contains(child.key())) continue;
      const std::string param = child.key().substr(0, child.key().size() - 5);  // "<param>_int8"
      target.named_parameters(/*recurse=*/false)[param].set_data(at::empty({0}, at::kFloat));
      target.register_module(child.key(), std::dynamic_pointer_cast<Int8WeightImpl>(int8->clone()));
      for (auto& p : target.parameters(/*recurse=*/false)) p.set_requires_grad(false);
    }
  }
  torch::serialize::OutputArchive saved;
  original.save(saved);
  std::stringstream bytes;
  saved.save_to(bytes);
  torch::serialize::InputArchive loaded;
  loaded.load_from(bytes);
  copy.load(loaded);
}

}  // namespace detail
}  // namespace mha
