// read_state_dict, load_state_dict, state_dict and save_state_dict: format
// dispatch, key selection and renaming, validation (with hints,
// load_messages.cpp), then the copy.

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <mha/state_dict.h>
#include <torch/utils.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "state_dict/errors.h"
#include "state_dict/formats.h"
#include "state_dict/load_messages.h"

namespace mha {
namespace {

using detail::TensorMap;

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

/// The options' prefix ending with '.' unless empty: "self_attn" means "self_attn.".
std::string dotted_prefix(const LoadOptions& options) {
  std::string prefix = options.prefix();
  if (!prefix.empty() && prefix.back() != '.') {
    prefix += '.';
  }
  return prefix;
}

/// Step 1: the keys under `prefix` (which ends with '.' unless empty), stripped.
/// `module` (may be null): what they are for, to suggest a prefix.
TensorMap select_prefix(const TensorMap& state_dict_in,
                        const std::string& prefix,
                        const std::string& source,
                        const torch::nn::Module* module) {
  TensorMap selected;
  for (const auto& [key, tensor] : state_dict_in) {
    if (key.size() > prefix.size() && key.compare(0, prefix.size(), prefix) == 0) {
      selected.emplace(key.substr(prefix.size()), tensor);
    }
  }
  if (!prefix.empty() && selected.empty()) {
    detail::fail_file(source, detail::unmatched_prefix_message(state_dict_in, prefix, module));
  }
  return selected;
}

/// Step 2: the keys renamed by `key_map`; two keys with one new name are an error.
TensorMap rename_keys(const TensorMap& selected,
                      const KeyMap& key_map,
                      const std::string& prefix,
                      const std::string& source) {
  TensorMap provided;
  std::map<std::string, std::string> renamed_from;
  for (const auto& [key, tensor] : selected) {
    const std::string name = key_map.apply(key);
    const auto [it, inserted] = renamed_from.emplace(name, key);
    if (!inserted) {
      detail::fail_file(source, fmt::format("keys '{}{}' and '{}{}' both map to '{}'", prefix,
                                            it->second, prefix, key, name));
    }
    provided.emplace(name, tensor);
  }
  return provided;
}

/// What step 3 decided: the keys that did not match, the problems, the copies.
struct LoadPlan {
  LoadResult result;
  std::vector<std::string> errors;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;  // (destination, converted)
};

/// Step 3, for one of the module's tensors that the file provides: checks the
/// shape and converts the value (copy_ semantics: any dtype converts; done now
/// so that a failure leaves the module untouched).
void plan_copy(const std::string& name,
               const torch::Tensor& destination,
               const torch::Tensor& value,
               LoadPlan& plan) {
  if (value.sizes() != destination.sizes()) {
    // Python's wording (torch/nn/modules/module.py, _load_from_state_dict).
    plan.errors.push_back(fmt::format(
        "size mismatch for {}: copying a param with shape {} from checkpoint, the shape in "
        "current model is {}.",
        name, fmt::streamed(value.sizes()), fmt::streamed(destination.sizes())));
    return;
  }
  try {
    plan.copies.emplace_back(destination,
                             value.to(destination.device(), destination.scalar_type()));
  } catch (const c10::Error& e) {
    plan.errors.push_back(
        fmt::format("cannot convert {} from {} to {}: {}", name, c10::toString(value.scalar_type()),
                    c10::toString(destination.scalar_type()), e.what_without_backtrace()));
  }
}

/// Step 3: matches the provided tensors against the module's.
LoadPlan plan_load(const torch::nn::Module& module, const TensorMap& provided, bool strict) {
  LoadPlan plan;
  std::set<std::string> used;
  for (const auto& [name, destination] : state_dict(module)) {
    const auto found = provided.find(name);
    if (found == provided.end()) {
      plan.result.missing_keys.push_back(name);
      continue;
    }
    used.insert(name);
    plan_copy(name, destination, found->second, plan);
  }
  for (const auto& [name, tensor] : provided) {
    if (used.count(name) == 0) {
      plan.result.unexpected_keys.push_back(name);
    }
  }
  if (strict && !plan.result.unexpected_keys.empty()) {
    plan.errors.insert(plan.errors.begin(),
                       fmt::format("Unexpected key(s) in state_dict: {}.",
                                   detail::quoted_keys(plan.result.unexpected_keys)));
  }
  if (strict && !plan.result.missing_keys.empty()) {
    plan.errors.insert(plan.errors.begin(),
                       fmt::format("Missing key(s) in state_dict: {}.",
                                   detail::quoted_keys(plan.result.missing_keys)));
  }
  return plan;
}

/// Step 4: one error listing every problem, if there is any, and the hints
/// that the attention blocks of the file and of the module give.
void check_plan(const LoadPlan& plan,
                const torch::nn::Module& module,
                const TensorMap& state_dict_in,
                const LoadOptions& options,
                const std::string& source) {
  if (plan.errors.empty()) {
    return;
  }
  const std::string prefix = dotted_prefix(options);
  std::string message = fmt::format("error(s) in loading state_dict for {}{}:", module.name(),
                                    prefix.empty() ? "" : fmt::format(" (prefix '{}')", prefix));
  for (const auto& error : plan.errors) {
    message += "\n\t" + error;
  }
  for (const auto& hint : detail::load_hints(state_dict_in, prefix, options.key_map(), module)) {
    message += "\n\t" + hint;
  }
  detail::fail_file(source, message);
}

/// Steps 1 and 2.
TensorMap select_keys(const TensorMap& state_dict_in,
                      const LoadOptions& options,
                      const std::string& source,
                      const torch::nn::Module* module) {
  const std::string prefix = dotted_prefix(options);
  return rename_keys(select_prefix(state_dict_in, prefix, source, module), options.key_map(),
                     prefix, source);
}

}  // namespace

ReadResult read_state_dict_with_report(const std::string& path) {
  switch (detail::detect_format(path)) {
    case detail::FileFormat::kTorchSave:
      return detail::read_torch_save(path);
    case detail::FileFormat::kTorchScript:
      return {detail::read_torchscript(path), {}};
    case detail::FileFormat::kSafetensors:
      return {detail::read_safetensors(path), {}};
  }
  detail::fail_file(path, "unknown format");
}

std::map<std::string, torch::Tensor> read_state_dict(const std::string& path) {
  return read_state_dict_with_report(path).tensors;
}

std::vector<std::pair<std::string, torch::Tensor>> state_dict(const torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  add_state(module, "", out);
  return out;
}

LoadResult load_state_dict(torch::nn::Module& module,
                           const std::string& path,
                           const LoadOptions& options) {
  ReadResult read = read_state_dict_with_report(path);
  LoadResult result = load_state_dict(module, read.tensors, options, path);
  result.skipped_paths = std::move(read.skipped);
  return result;
}

std::map<std::string, torch::Tensor> select_state_dict(
    const std::map<std::string, torch::Tensor>& state_dict_in,
    const LoadOptions& options,
    const std::string& source) {
  return select_keys(state_dict_in, options, source, nullptr);
}

LoadResult load_state_dict(torch::nn::Module& module,
                           const std::map<std::string, torch::Tensor>& state_dict_in,
                           const LoadOptions& options,
                           const std::string& source) {
  const TensorMap provided = select_keys(state_dict_in, options, source, &module);
  LoadPlan plan = plan_load(module, provided, options.strict());
  check_plan(plan, module, state_dict_in, options, source);
  // Step 5, the copy: cannot fail any more (same shapes, dtypes and devices).
  torch::NoGradGuard no_grad;
  for (auto& [destination, converted] : plan.copies) {
    destination.copy_(converted);
  }
  return plan.result;
}

void save_state_dict(const torch::nn::Module& module, const std::string& path) {
  const auto dot = path.find_last_of('.');
  const auto slash = path.find_last_of('/');
  std::string extension = dot == std::string::npos || (slash != std::string::npos && dot < slash)
                              ? ""
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
