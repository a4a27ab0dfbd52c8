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

#include "linear/int8_linear.h"
#include "linear/packed_weight.h"
#include "linear/weight_form.h"
#include "state_dict/errors.h"
#include "state_dict/formats.h"
#include "state_dict/load_messages.h"

namespace mha {
namespace {

using detail::TensorMap;

/// One entry of a module's state: a parameter or buffer, the values or
/// scales of an int8 weight (`mha::quantize_dynamic`), made from its packed
/// form, or the float values of a prepacked weight (`mha::prepack`).
struct StateEntry {
  std::string name;
  torch::Tensor tensor;
  std::shared_ptr<detail::Int8WeightImpl> int8;  // for int8 values and scales
  torch::nn::Module* owner = nullptr;            // a converted weight's parent
  std::string param;                             // a converted weight's parameter
  bool is_scale = false;
  std::shared_ptr<detail::PackedWeightImpl> packed;  // for prepacked values
};

/// `module`'s parameter `param`'s converted form of type `Form`, or null.
template <typename Form>
std::shared_ptr<Form> form_of(const torch::nn::Module& module,
                              const std::string& param,
                              const torch::Tensor& value) {
  if (!detail::is_placeholder(value)) return nullptr;
  return std::const_pointer_cast<Form>(
      std::dynamic_pointer_cast<const Form>(detail::weight_form(module, param)));
}

void add_state(const torch::nn::Module& module,
               const std::string& prefix,
               std::vector<StateEntry>& out) {
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    const torch::Tensor& value = item.value();
    if (!value.defined()) continue;
    // A load swaps the child of the module being loaded, which is not const.
    auto* owner = const_cast<torch::nn::Module*>(&module);
    if (const auto packed = form_of<detail::PackedWeightImpl>(module, item.key(), value)) {
      out.push_back({prefix + item.key(), *packed->float_weight(), nullptr, owner, item.key(),
                     false, packed});
      continue;
    }
    if (const auto int8 = form_of<detail::Int8WeightImpl>(module, item.key(), value)) {
      const detail::Int8Values values = int8->values();
      out.push_back({prefix + item.key(), values.values, int8, owner, item.key(), false, nullptr});
      out.push_back(
          {prefix + item.key() + "_scale", values.scales, int8, owner, item.key(), true, nullptr});
      continue;
    }
    out.push_back({prefix + item.key(), value.detach(), nullptr, nullptr, "", false, nullptr});
  }
  for (const auto& item : module.named_buffers(/*recurse=*/false)) {
    if (item.value().defined()) {
      out.push_back(
          {prefix + item.key(), item.value().detach(), nullptr, nullptr, "", false, nullptr});
    }
  }
  for (const auto& child : module.named_children()) {
    if (dynamic_cast<const detail::WeightForm*>(child.value().get()) != nullptr) continue;
    add_state(*child.value(), prefix + child.key() + ".", out);
  }
}

std::vector<StateEntry> state_entries(const torch::nn::Module& module) {
  std::vector<StateEntry> out;
  add_state(module, "", out);
  return out;
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
  /// Converted weights packed from the file's values: (entry, new child).
  std::vector<std::pair<const StateEntry*, std::shared_ptr<torch::nn::Module>>> form_swaps;
};

/// Python's wording (torch/nn/modules/module.py, _load_from_state_dict).
std::string size_mismatch(const std::string& name,
                          const torch::Tensor& value,
                          const torch::Tensor& destination) {
  return fmt::format(
      "size mismatch for {}: copying a param with shape {} from checkpoint, the shape in "
      "current model is {}.",
      name, fmt::streamed(value.sizes()), fmt::streamed(destination.sizes()));
}

/// Step 3, for one of the module's tensors that the file provides: checks the
/// shape and converts the value (copy_ semantics: any dtype converts; done now
/// so that a failure leaves the module untouched).
void plan_copy(const std::string& name,
               const torch::Tensor& destination,
               const torch::Tensor& value,
               const TensorMap& provided,
               LoadPlan& plan) {
  if (value.sizes() != destination.sizes()) {
    plan.errors.push_back(size_mismatch(name, value, destination));
    return;
  }
  if (value.scalar_type() == at::kChar && destination.is_floating_point() &&
      provided.count(name + "_scale") != 0) {
    plan.errors.push_back(fmt::format(
        "{} is int8 with scales ({}_scale), from a module quantized by mha::quantize_dynamic: "
        "quantize this module first (mha::quantize_dynamic), then load",
        name, name));
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

/// The int8 values (and scales) that `value` gives an int8 weight: float
/// weights are quantized by the weight's recipe, int8 ones need their scales.
std::optional<detail::Int8Values> int8_values_of(const StateEntry& entry,
                                                 const torch::Tensor& value,
                                                 const TensorMap& provided,
                                                 std::vector<std::string>& errors) {
  if (value.is_floating_point()) {
    return detail::quantize_weight(value.to(torch::kCPU, torch::kFloat).contiguous(),
                                   entry.int8->recipe());
  }
  const std::string scale_name = entry.name + "_scale";
  const auto scale = provided.find(scale_name);
  if (value.scalar_type() != at::kChar) {
    errors.push_back(
        fmt::format("cannot load {} from {}: an int8 weight loads from a float "
                    "weight or from int8 values with their scales",
                    entry.name, c10::toString(value.scalar_type())));
  } else if (scale == provided.end()) {
    errors.push_back(
        fmt::format("{} is int8 but the state_dict has no {}", entry.name, scale_name));
  } else if (scale->second.sizes() != entry.int8->scales().sizes()) {
    errors.push_back(size_mismatch(scale_name, scale->second, entry.int8->scales()));
  } else {
    return detail::Int8Values{value.to(torch::kCPU).contiguous(),
                              scale->second.to(torch::kCPU, torch::kDouble).contiguous()};
  }
  return std::nullopt;
}

/// Step 3 for an int8 weight: its new packed form, made now.
void plan_int8(const StateEntry& entry,
               const torch::Tensor& value,
               const TensorMap& provided,
               LoadPlan& plan) {
  if (value.sizes() != entry.tensor.sizes()) {
    plan.errors.push_back(size_mismatch(entry.name, value, entry.tensor));
    return;
  }
  const auto values = int8_values_of(entry, value, provided, plan.errors);
  if (!values) return;
  try {
    plan.form_swaps.emplace_back(&entry, entry.int8->repacked(*values));
  } catch (const c10::Error& e) {
    plan.errors.push_back(
        fmt::format("cannot pack {} as int8: {}", entry.name, e.what_without_backtrace()));
  }
}

/// Step 3 for a prepacked weight: the value converted as a copy would be,
/// then packed now.
void plan_packed(const StateEntry& entry,
                 const torch::Tensor& value,
                 const TensorMap& provided,
                 LoadPlan& plan) {
  const size_t copies = plan.copies.size();
  plan_copy(entry.name, entry.tensor, value, provided, plan);
  if (plan.copies.size() == copies) return;                   // an error, listed
  const torch::Tensor converted = plan.copies.back().second;  // float32 (out, in)
  plan.copies.pop_back();
  try {
    plan.form_swaps.emplace_back(&entry, entry.packed->repacked(converted.contiguous()));
  } catch (const c10::Error& e) {
    plan.errors.push_back(
        fmt::format("cannot prepack {}: {}", entry.name, e.what_without_backtrace()));
  }
}

/// Step 3: matches the provided tensors against the module's.
LoadPlan plan_load(const std::vector<StateEntry>& entries, const TensorMap& provided, bool strict) {
  LoadPlan plan;
  std::set<std::string> used;
  for (const StateEntry& entry : entries) {
    const auto found = provided.find(entry.name);
    if (entry.is_scale) {  // read with its int8 values; a float weight needs none
      if (found != provided.end()) used.insert(entry.name);
      continue;
    }
    if (found == provided.end()) {
      plan.result.missing_keys.push_back(entry.name);
      continue;
    }
    used.insert(entry.name);
    if (entry.int8) {
      plan_int8(entry, found->second, provided, plan);
    } else if (entry.packed) {
      plan_packed(entry, found->second, provided, plan);
    } else {
      plan_copy(entry.name, entry.tensor, found->second, provided, plan);
    }
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
  for (StateEntry& entry : state_entries(module)) {
    out.emplace_back(std::move(entry.name), std::move(entry.tensor));
  }
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
  const std::vector<StateEntry> entries = state_entries(module);
  LoadPlan plan = plan_load(entries, provided, options.strict());
  check_plan(plan, module, state_dict_in, options, source);
  // Step 5, the copy: cannot fail any more (same shapes, dtypes and devices).
  torch::NoGradGuard no_grad;
  for (auto& [destination, converted] : plan.copies) {
    destination.copy_(converted);
  }
  for (auto& [entry, form] : plan.form_swaps) {
    const std::string suffix = entry->int8 ? "_int8" : "_packed";
    form->train(entry->owner->is_training());
    entry->owner->replace_module(entry->param + suffix, form);
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
