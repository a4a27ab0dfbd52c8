// CheckpointMap: module tensors built from a checkpoint's (renames, q/k/v
// concatenation, any function), and load_checkpoint, which checks every rule
// against the module before load_state_dict copies anything.

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <mha/hugging_face.h>
#include <mha/state_dict.h>

#include <set>

#include "common/shape_format.h"

namespace mha {

CheckpointMap& CheckpointMap::rename(std::string to, std::string from, std::string shape_from) {
  rules_.push_back({std::move(to), {std::move(from)}, nullptr, std::move(shape_from)});
  return *this;
}

CheckpointMap& CheckpointMap::concat(std::string to,
                                     std::vector<std::string> from,
                                     std::string shape_from) {
  TORCH_CHECK_VALUE(!from.empty(), "concat: expected at least one key for ", to);
  Build cat = [](const std::vector<torch::Tensor>& parts) { return torch::cat(parts, /*dim=*/0); };
  rules_.push_back({std::move(to), std::move(from), std::move(cat), std::move(shape_from)});
  return *this;
}

CheckpointMap& CheckpointMap::add(std::string to,
                                  std::vector<std::string> from,
                                  Build build,
                                  std::string shape_from) {
  TORCH_CHECK_VALUE(build, "add: expected a build function for ", to);
  rules_.push_back({std::move(to), std::move(from), std::move(build), std::move(shape_from)});
  return *this;
}

CheckpointMap& CheckpointMap::attention(const std::string& to_prefix,
                                        const std::string& q,
                                        const std::string& k,
                                        const std::string& v,
                                        const std::string& out,
                                        const std::string& shape_from) {
  concat(to_prefix + "in_proj_weight", {q + ".weight", k + ".weight", v + ".weight"}, shape_from);
  concat(to_prefix + "in_proj_bias", {q + ".bias", k + ".bias", v + ".bias"}, shape_from);
  return rename_weight_and_bias(to_prefix + "out_proj", out, shape_from);
}

CheckpointMap& CheckpointMap::rename_weight_and_bias(const std::string& to,
                                                     const std::string& from,
                                                     const std::string& shape_from) {
  rename(to + ".weight", from + ".weight", shape_from);
  return rename(to + ".bias", from + ".bias", shape_from);
}

std::vector<std::string> CheckpointMap::sources() const {
  std::vector<std::string> out;
  for (const auto& rule : rules_) {
    out.insert(out.end(), rule.from.begin(), rule.from.end());
  }
  return out;
}

std::map<std::string, torch::Tensor> CheckpointMap::build(
    const std::map<std::string, torch::Tensor>& checkpoint, const std::string& source) const {
  std::vector<std::string> missing;
  for (const auto& rule : rules_) {
    for (const auto& key : rule.from) {
      if (checkpoint.count(key) == 0) {
        missing.push_back(fmt::format("'{}' (for {})", key, rule.to));
      }
    }
  }
  TORCH_CHECK(missing.empty(), source, ": missing key", missing.size() > 1 ? "s " : " ",
              fmt::format("{}", fmt::join(missing, ", ")));
  std::map<std::string, torch::Tensor> out;
  for (const auto& rule : rules_) {
    std::vector<torch::Tensor> parts;
    for (const auto& key : rule.from) {
      parts.push_back(checkpoint.at(key));
    }
    if (!rule.build) {
      TORCH_CHECK_VALUE(parts.size() == 1, "rule for ", rule.to,
                        ": expected one key without a build function, but got ", parts.size());
    }
    try {
      out[rule.to] = rule.build ? rule.build(parts) : parts.front();
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, source, ": cannot build ", rule.to, " from ",
                  fmt::format("{}", fmt::join(rule.from, ", ")), ": ", e.what_without_backtrace());
    }
  }
  return out;
}

void load_checkpoint(torch::nn::Module& module,
                     const std::map<std::string, torch::Tensor>& checkpoint,
                     const CheckpointMap& map,
                     const std::string& source) {
  const std::map<std::string, torch::Tensor> built = map.build(checkpoint, source);
  std::map<std::string, torch::Tensor> expected;
  for (const auto& [name, tensor] : state_dict(module)) {
    expected.emplace(name, tensor);
  }
  std::vector<std::string> problems;
  for (const auto& rule : map.rules()) {
    auto it = expected.find(rule.to);
    if (it == expected.end()) {
      problems.push_back(fmt::format("the module has no tensor '{}'", rule.to));
      continue;
    }
    const torch::Tensor& value = built.at(rule.to);
    if (value.sizes() != it->second.sizes()) {
      problems.push_back(
          fmt::format("{}: expected shape {}{}, but {} {} shape {}", rule.to,
                      detail::python_tuple(it->second.sizes()),
                      rule.shape_from.empty() ? "" : fmt::format(" ({})", rule.shape_from),
                      fmt::join(rule.from, " + "), rule.from.size() > 1 ? "give" : "has",
                      detail::python_tuple(value.sizes())));
    }
  }
  for (const auto& [name, tensor] : expected) {
    if (built.count(name) == 0) {
      problems.push_back(fmt::format("no rule gives the module's tensor '{}'", name));
    }
  }
  TORCH_CHECK(problems.empty(), source,
              ": cannot load: ", fmt::format("{}", fmt::join(problems, "; ")));
  load_state_dict(module, built, LoadOptions(), source);
}

}  // namespace mha
