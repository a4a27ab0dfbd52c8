// read_state_dict, load_state_dict, state_dict and save_state_dict: format
// dispatch, key selection and renaming, validation, then the copy.

#include <mha/state_dict.h>

#include "state_dict/errors.h"
#include "state_dict/formats.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <torch/utils.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace mha {
namespace {

using detail::TensorMap;

/// Up to `limit` keys of `tensors`, quoted, for messages.
std::string some_keys(const TensorMap& tensors, size_t limit = 8) {
  std::vector<std::string> keys;
  for (const auto& item : tensors) {
    if (keys.size() == limit) {
      keys.push_back(fmt::format("... ({} in all)", tensors.size()));
      break;
    }
    keys.push_back("'" + item.first + "'");
  }
  return keys.empty() ? "none" : fmt::format("{}", fmt::join(keys, ", "));
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::vector<std::string> quoted;
  for (const auto& name : names) {
    quoted.push_back("\"" + name + "\"");
  }
  return fmt::format("{}", fmt::join(quoted, ", "));
}

void add_state(const torch::nn::Module& module,
               const std::string& prefix,
               std::vector<std::pair<std::string, torch::Tensor>>& out) {
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    if (item.value().defined()) {
      out.emplace_back(prefix + item.key(), item.value().detach());
    }
  }
  for (const auto& item : module.named_buffers(/*recurse=*/false)) {
    if (item.value().defined()) {
      out.emplace_back(prefix + item.key(), item.value().detach());
    }
  }
  for (const auto& child : module.named_children()) {
    add_state(*child.value(), prefix + child.key() + ".", out);
  }
}

}  // namespace

std::map<std::string, torch::Tensor> read_state_dict(const std::string& path) {
  switch (detail::detect_format(path)) {
    case detail::FileFormat::kTorchSave:
      return detail::read_torch_save(path);
    case detail::FileFormat::kTorchScript:
      return detail::read_torchscript(path);
    case detail::FileFormat::kSafetensors:
      return detail::read_safetensors(path);
  }
  detail::fail_file(path, "unknown format");
}

std::vector<std::pair<std::string, torch::Tensor>> state_dict(const torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  add_state(module, "", out);
  return out;
}

LoadResult load_state_dict(torch::nn::Module& module,
                           const std::string& path,
                           const LoadOptions& options) {
  return load_state_dict(module, read_state_dict(path), options, path);
}

LoadResult load_state_dict(torch::nn::Module& module,
                           const std::map<std::string, torch::Tensor>& state_dict_in,
                           const LoadOptions& options,
                           const std::string& source) {
  // 1. Select the keys under the prefix and strip it.
  std::string prefix = options.prefix();
  if (!prefix.empty() && prefix.back() != '.') {
    prefix += '.';  // "self_attn" means "self_attn."
  }
  TensorMap selected;
  for (const auto& [key, tensor] : state_dict_in) {
    if (key.size() > prefix.size() && key.compare(0, prefix.size(), prefix) == 0) {
      selected.emplace(key.substr(prefix.size()), tensor);
    }
  }
  if (!prefix.empty() && selected.empty()) {
    detail::fail_file(source, fmt::format("prefix '{}' matches no key; the keys are {}", prefix,
                                          some_keys(state_dict_in)));
  }

  // 2. Rename.
  TensorMap provided;
  std::map<std::string, std::string> renamed_from;
  for (const auto& [key, tensor] : selected) {
    const std::string name = options.key_map().apply(key);
    const auto [it, inserted] = renamed_from.emplace(name, key);
    if (!inserted) {
      detail::fail_file(source, fmt::format("keys '{}{}' and '{}{}' both map to '{}'", prefix,
                                            it->second, prefix, key, name));
    }
    provided.emplace(name, tensor);
  }

  // 3. Match against the module and validate everything before copying.
  const auto expected = state_dict(module);
  LoadResult result;
  std::vector<std::string> errors;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;  // (destination, converted)
  std::set<std::string> used;
  for (const auto& [name, destination] : expected) {
    const auto found = provided.find(name);
    if (found == provided.end()) {
      result.missing_keys.push_back(name);
      continue;
    }
    used.insert(name);
    const auto& value = found->second;
    if (value.sizes() != destination.sizes()) {
      // Python's wording (torch/nn/modules/module.py, _load_from_state_dict).
      errors.push_back(fmt::format(
          "size mismatch for {}: copying a param with shape {} from checkpoint, the shape in "
          "current model is {}.",
          name, fmt::streamed(value.sizes()), fmt::streamed(destination.sizes())));
      continue;
    }
    try {
      // copy_ semantics: any dtype converts; done now so that a failure leaves
      // the module untouched.
      copies.emplace_back(destination, value.to(destination.device(), destination.scalar_type()));
    } catch (const c10::Error& e) {
      errors.push_back(fmt::format("cannot convert {} from {} to {}: {}", name,
                                   c10::toString(value.scalar_type()),
                                   c10::toString(destination.scalar_type()),
                                   e.what_without_backtrace()));
    }
  }
  for (const auto& [name, tensor] : provided) {
    if (used.count(name) == 0) {
      result.unexpected_keys.push_back(name);
    }
  }
  if (options.strict()) {
    if (!result.unexpected_keys.empty()) {
      errors.insert(errors.begin(),
                    fmt::format("Unexpected key(s) in state_dict: {}.",
                                quoted_list(result.unexpected_keys)));
    }
    if (!result.missing_keys.empty()) {
      errors.insert(errors.begin(), fmt::format("Missing key(s) in state_dict: {}.",
                                                quoted_list(result.missing_keys)));
    }
  }
  if (!errors.empty()) {
    std::string message = fmt::format("error(s) in loading state_dict for {}{}:", module.name(),
                                      prefix.empty() ? "" : fmt::format(" (prefix '{}')", prefix));
    for (const auto& error : errors) {
      message += "\n\t" + error;
    }
    detail::fail_file(source, message);
  }

  // 4. Copy: cannot fail any more (same shapes, dtypes and devices).
  torch::NoGradGuard no_grad;
  for (auto& [destination, converted] : copies) {
    destination.copy_(converted);
  }
  return result;
}

void save_state_dict(const torch::nn::Module& module, const std::string& path) {
  const auto dot = path.find_last_of('.');
  const auto slash = path.find_last_of('/');
  std::string extension =
      dot == std::string::npos || (slash != std::string::npos && dot < slash) ? ""
                                                                                : path.substr(dot);
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto tensors = state_dict(module);
  if (extension == ".safetensors") {
    detail::write_safetensors(tensors, path);
  } else if (extension == ".pt" || extension == ".pth" || extension == ".bin") {
    detail::write_torch_save(tensors, path);
  } else {
    detail::fail_file(path, fmt::format("cannot tell the format from the extension '{}': use "
                                        ".safetensors, or .pt/.pth/.bin for the torch.save format",
                                        extension));
  }
}

}  // namespace mha
