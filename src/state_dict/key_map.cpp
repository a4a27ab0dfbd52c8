#include <mha/state_dict.h>

#include <array>
#include <utility>

namespace mha {

KeyMap& KeyMap::rename(std::string from, std::string to) {
  return add([from = std::move(from),
              to = std::move(to)](const std::string& key) -> std::optional<std::string> {
    if (key == from) {
      return to;
    }
    return std::nullopt;
  });
}

KeyMap& KeyMap::rename_suffix(std::string from, std::string to) {
  return add([from = std::move(from),
              to = std::move(to)](const std::string& key) -> std::optional<std::string> {
    if (key == from) {
      return to;
    }
    // "<anything>.<from>" -> "<anything>.<to>"
    if (key.size() > from.size() && key[key.size() - from.size() - 1] == '.' &&
        key.compare(key.size() - from.size(), from.size(), from) == 0) {
      return key.substr(0, key.size() - from.size()) + to;
    }
    return std::nullopt;
  });
}

KeyMap& KeyMap::add(Rule rule) {
  rules_.push_back(std::move(rule));
  return *this;
}

std::string KeyMap::apply(const std::string& key) const {
  for (const auto& rule : rules_) {
    if (auto renamed = rule(key)) {
      return *renamed;
    }
  }
  return key;
}

KeyMap KeyMap::vit() {
  // timm's Attention: qkv = Linear(dim, 3 * dim), proj = Linear(dim, dim).
  static const std::array<std::pair<const char*, const char*>, 4> kNames{{
      {"qkv.weight", "in_proj_weight"},
      {"qkv.bias", "in_proj_bias"},
      {"proj.weight", "out_proj.weight"},
      {"proj.bias", "out_proj.bias"},
  }};
  KeyMap map;
  for (const auto& [from, to] : kNames) {
    map.rename(from, to);  // the attention's own keys, after a prefix
    map.rename_suffix(std::string("attn.") + from, std::string("attn.") + to);  // whole models
  }
  return map;
}

}  // namespace mha
