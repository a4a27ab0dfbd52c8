#pragma once

// The messages of a failed load that lead to the fix: shortened key lists, a
// prefix that matches no key ("did you mean ..."), and hints from the
// attention blocks of the file and of the module (the prefix to use,
// KeyMap::vit(), the options to build the module with).

#include <mha/state_dict.h>
#include <torch/nn/module.h>

#include <string>
#include <vector>

#include "state_dict/formats.h"

namespace mha {
namespace detail {

/// The keys quoted with `"` and joined with ", "; past `limit`, "... (N in all)".
std::string quoted_keys(const std::vector<std::string>& keys, size_t limit = 10);

/// Why `prefix` (non-empty, ending with '.') selects nothing from `state_dict`:
/// the nearest prefix of an attention block and a summary of the blocks, or,
/// without blocks, the first keys. `module` (may be null) is what is being
/// loaded: with attention blocks of its own, the prefix suggested is the one
/// under which the file has them all.
std::string unmatched_prefix_message(const TensorMap& state_dict,
                                     const std::string& prefix,
                                     const torch::nn::Module* module);

/// Hints for a failed load of `state_dict` under `prefix` (ending with '.'
/// unless empty) into `module`, comparing the attention blocks of both: the
/// prefix under which the file holds the module's blocks, timm's qkv/proj
/// names without `KeyMap::vit()`, and options (kdim/vdim, bias, add_bias_kv)
/// that differ. Empty when the module has no attention block.
std::vector<std::string> load_hints(const TensorMap& state_dict,
                                    const std::string& prefix,
                                    const KeyMap& key_map,
                                    const torch::nn::Module& module);

}  // namespace detail
}  // namespace mha
