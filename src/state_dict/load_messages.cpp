// The parts of a failed load's message that lead to the fix: from the
// attention blocks of the file and of the module, the prefix to use, the key
// map and the options; key lists shortened with a count.

#include "state_dict/load_messages.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mha/attention_blocks.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>
#include <utility>

#include "state_dict/block_summary.h"

namespace mha {
namespace detail {
namespace {

constexpr const char* kListHint =
    "`mha-parity --list FILE` or mha::find_attention_blocks shows each block";

std::vector<AttentionBlock> module_blocks(const torch::nn::Module& module) {
  const auto named = state_dict(module);
  return find_attention_blocks(TensorMap(named.begin(), named.end()));
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The prefixes under which `file` holds every block of `module` (at the
/// module's own names), in the file's order; every block's prefix when
/// `module` has none.
std::vector<std::string> candidate_prefixes(const std::vector<AttentionBlock>& file,
                                            const std::vector<AttentionBlock>& module) {
  std::set<std::string> in_file;
  for (const auto& block : file) {
    in_file.insert(block.prefix);
  }
  std::vector<std::string> candidates;
  for (const auto& block : file) {
    const std::string inner = module.empty() ? "" : module.front().prefix;
    if (!ends_with(block.prefix, inner)) {
      continue;
    }
    const std::string outer = block.prefix.substr(0, block.prefix.size() - inner.size());
    const bool all_there = std::all_of(module.begin(), module.end(), [&](const auto& own) {
      return in_file.count(outer + own.prefix) > 0;
    });
    if ((outer.empty() || outer.back() == '.') && all_there &&
        std::find(candidates.begin(), candidates.end(), outer) == candidates.end()) {
      candidates.push_back(outer);
    }
  }
  return candidates;
}

/// Levenshtein distance: the fewest single-character edits from `a` to `b`.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

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

bool same_options(const AttentionBlock& a, const AttentionBlock& b) {
  return a.embed_dim == b.embed_dim && a.kdim == b.kdim && a.vdim == b.vdim && a.bias == b.bias &&
         a.add_bias_kv == b.add_bias_kv && a.packed == b.packed;
}

/// The file's block at `prefix` (there is one for each candidate prefix).
const AttentionBlock& block_at(const std::vector<AttentionBlock>& file, const std::string& prefix) {
  return *std::find_if(file.begin(), file.end(),
                       [&](const AttentionBlock& block) { return block.prefix == prefix; });
}

/// How many of the module's blocks have other options than the file's under `outer`.
size_t mismatches(const std::string& outer,
                  const std::vector<AttentionBlock>& file,
                  const std::vector<AttentionBlock>& own) {
  return std::count_if(own.begin(), own.end(), [&](const AttentionBlock& block) {
    return !same_options(block, block_at(file, outer + block.prefix));
  });
}

/// The candidate with the fewest blocks of other options than the module's
/// (a block of the module's width before a nearer name of another width),
/// then the nearest to `prefix`. The first of those as good.
const std::string& nearest(const std::string& prefix,
                           const std::vector<AttentionBlock>& file,
                           const std::vector<AttentionBlock>& own,
                           const std::vector<std::string>& candidates) {
  auto score = [&](const std::string& candidate) {
    return std::make_pair(mismatches(candidate, file, own), edit_distance(prefix, candidate));
  };
  return *std::min_element(
      candidates.begin(), candidates.end(),
      [&](const std::string& a, const std::string& b) { return score(a) < score(b); });
}

/// What keeps the file's block `file` from loading into the module's `own`
/// (the same place), if its names or its options.
std::optional<std::string> block_hint(const AttentionBlock& own,
                                      AttentionBlock file,
                                      const KeyMap& key_map) {
  if (own.naming != AttentionNaming::kMultiheadAttention) {
    return std::nullopt;
  }
  if (file.naming == AttentionNaming::kQkvProj) {
    if (key_map.apply(own.prefix + "qkv.weight") != own.prefix + "in_proj_weight") {
      return fmt::format(
          "hint: the attention at '{}' has timm's qkv/proj names: load it with "
          "LoadOptions().key_map(mha::KeyMap::vit())",
          file.prefix);
    }
    file.naming = AttentionNaming::kMultiheadAttention;  // as the key map renames it
  }
  if (same_options(own, file)) {
    return std::nullopt;
  }
  return fmt::format("hint: the attention at '{}' has {}; the module's{} has {}: build it with {}",
                     file.prefix, describe_options(file),
                     own.prefix.empty() ? "" : " '" + own.prefix + "'", describe_options(own),
                     options_code(file));
}

}  // namespace

std::string quoted_keys(const std::vector<std::string>& keys, size_t limit) {
  std::vector<std::string> quoted;
  for (size_t i = 0; i < keys.size() && i < limit; ++i) {
    quoted.push_back("\"" + keys[i] + "\"");
  }
  if (keys.size() > limit) {
    quoted.push_back(fmt::format("... ({} in all)", keys.size()));
  }
  return fmt::format("{}", fmt::join(quoted, ", "));
}

std::string unmatched_prefix_message(const TensorMap& state_dict,
                                     const std::string& prefix,
                                     const torch::nn::Module* module) {
  std::string message = fmt::format("prefix '{}' matches no key", prefix);
  const auto file = find_attention_blocks(state_dict);
  if (file.empty()) {
    return message + "; the keys are " + some_keys(state_dict);
  }
  const auto own = module ? module_blocks(*module) : std::vector<AttentionBlock>{};
  const auto candidates = candidate_prefixes(file, own);
  if (!candidates.empty()) {
    const std::string& meant = nearest(prefix, file, own, candidates);
    message += meant.empty() ? "; did you mean '' (no prefix)?"
                             : fmt::format("; did you mean '{}'?", meant);
  }
  return message + fmt::format(" The {} keys hold {}. {}.", state_dict.size(),
                               summarize_attention_blocks(file), kListHint);
}

std::vector<std::string> load_hints(const TensorMap& state_dict,
                                    const std::string& prefix,
                                    const KeyMap& key_map,
                                    const torch::nn::Module& module) {
  const auto own = module_blocks(module);
  const auto file = own.empty() ? std::vector<AttentionBlock>{} : find_attention_blocks(state_dict);
  if (file.empty()) {
    return {};
  }
  const auto candidates = candidate_prefixes(file, own);
  const std::string summary =
      fmt::format("hint: the {} keys hold {}", state_dict.size(), summarize_attention_blocks(file));
  if (candidates.empty()) {
    return {fmt::format("{}. {}.", summary, kListHint)};
  }
  std::vector<std::string> hints;
  const bool right = std::find(candidates.begin(), candidates.end(), prefix) != candidates.end();
  const std::string& outer = right ? prefix : nearest(prefix, file, own, candidates);
  if (!right) {
    hints.push_back(fmt::format("{}; did you mean LoadOptions().prefix(\"{}\")? {}.", summary,
                                outer, kListHint));
  }
  // What else the blocks there need: the key map, other options.
  for (const auto& block : own) {
    if (auto hint = block_hint(block, block_at(file, outer + block.prefix), key_map)) {
      hints.push_back(std::move(*hint));
    }
  }
  return hints;
}

}  // namespace detail
}  // namespace mha
