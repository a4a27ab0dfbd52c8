#pragma once

// Loading and saving the weights of any LibTorch module by their dotted names,
// from the files PyTorch users have: `torch.save(model.state_dict())` archives,
// `.safetensors` files and TorchScript archives.

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mha {

/// Renames the keys of a file before they are matched against a module's
/// parameter and buffer names. Rules are tried in the order they were added;
/// the first that matches renames the key, keys no rule matches are kept.
///
/// Example:
/// ```
/// auto map = mha::KeyMap().rename_suffix("attn.qkv.weight", "attn.in_proj_weight");
/// map.apply("blocks.3.attn.qkv.weight");  // "blocks.3.attn.in_proj_weight"
/// ```
class KeyMap {
 public:
  /// A rule: the new name of a key, or `std::nullopt` when it does not apply.
  using Rule = std::function<std::optional<std::string>(const std::string&)>;

  /// Renames the key equal to `from` to `to`.
  KeyMap& rename(std::string from, std::string to);

  /// Renames a key whose trailing dotted components are `from` (the whole key
  /// or a suffix that starts after a '.'), replacing those components with `to`.
  KeyMap& rename_suffix(std::string from, std::string to);

  /// Adds an arbitrary rule.
  KeyMap& add(Rule rule);

  /// The name `key` gets: that of the first matching rule, else `key`.
  std::string apply(const std::string& key) const;

  /// True when no rule was added.
  bool empty() const { return rules_.empty(); }

  /// ViT/timm attention naming (`qkv.weight`, `qkv.bias`, `proj.weight`,
  /// `proj.bias`) onto `mha::MultiheadAttention`'s (`in_proj_weight`,
  /// `in_proj_bias`, `out_proj.weight`, `out_proj.bias`): the keys themselves
  /// (after a prefix such as `blocks.0.attn.` was stripped) and any key under
  /// an `attn.` component. timm's packed `qkv` rows are [q; k; v] like
  /// `in_proj_weight`, so the weights load unchanged; a ViT block is
  /// batch-first, so build the module with `batch_first(true)`.
  static KeyMap vit();

 private:
  std::vector<Rule> rules_;
};

/// Options of `load_state_dict`.
struct LoadOptions {
  /// Select the file's keys that start with this prefix and strip it (e.g.
  /// `"encoder.layers.0.self_attn."`), before `key_map` applies. Empty: all keys.
  TORCH_ARG(std::string, prefix) = "";
  /// Missing and unexpected keys are errors (Python's `strict=True`). Shape
  /// mismatches are errors either way, as in Python.
  TORCH_ARG(bool, strict) = true;
  /// Renames applied to the (prefix-stripped) keys, e.g. `KeyMap::vit()`.
  TORCH_ARG(KeyMap, key_map) = {};
};

/// What `load_state_dict` did not match (Python's `_IncompatibleKeys`): always
/// empty after a strict load.
struct LoadResult {
  /// The module's parameter and buffer names the file did not provide.
  std::vector<std::string> missing_keys;
  /// The (selected, renamed) file keys the module has no parameter or buffer for.
  std::vector<std::string> unexpected_keys;
};

/// Reads every tensor of a weights file into CPU tensors by name. The format is
/// detected from the content, not the name:
/// - `torch.save` archives (PyTorch 1.6+ zip format) of an `OrderedDict` or
///   `dict` of tensors, e.g. `torch.save(model.state_dict(), path)`: tensors
///   saved from CUDA load to the CPU, views of one storage stay views of one
///   storage, `_metadata` is ignored, nested dicts are flattened with '.'
///   (`{"model": sd}` gives `model.<key>`), other non-tensor values are skipped;
/// - `.safetensors` files;
/// - TorchScript archives (`torch.jit.save`): their named parameters and buffers.
///
/// Throws `c10::Error` naming the file and the problem (missing file,
/// unknown format, truncated or corrupt content).
std::map<std::string, torch::Tensor> read_state_dict(const std::string& path);

/// Python's `module.load_state_dict(torch.load(path))` for any LibTorch
/// module: parameters and buffers are matched by their full dotted names
/// (`named_parameters()`/`named_buffers()`), values are converted as by
/// `copy_` (dtype and device of the module's tensors are kept).
///
/// Everything is validated before anything is copied: on error the module is
/// unchanged, and the `c10::Error` lists all problems at once (missing and
/// unexpected keys when `strict`, shape mismatches with expected and actual
/// shapes, a prefix that matches no key).
///
/// Example:
/// ```
/// mha::MultiheadAttention attn(512, 8);
/// mha::load_state_dict(*attn, "encoder_layer.pt",
///                      mha::LoadOptions().prefix("self_attn."));
/// ```
LoadResult load_state_dict(torch::nn::Module& module,
                           const std::string& path,
                           const LoadOptions& options = {});

/// Same as the file overload, from tensors already in memory (e.g. the result
/// of `read_state_dict`). `source` names them in error messages.
LoadResult load_state_dict(torch::nn::Module& module,
                           const std::map<std::string, torch::Tensor>& state_dict,
                           const LoadOptions& options = {},
                           const std::string& source = "state_dict");

/// The module's defined parameters and buffers by full dotted name, in
/// Python's `state_dict()` order (each module's parameters, then its buffers,
/// then its children), detached (sharing storage with the module).
std::vector<std::pair<std::string, torch::Tensor>> state_dict(const torch::nn::Module& module);

/// Writes the module's `state_dict` (as CPU tensors). The format follows the
/// file name: `.safetensors`, or `.pt`/`.pth`/`.bin` for a `torch.save`-format
/// archive that Python reads with `torch.load(path, weights_only=True)` as a
/// `dict` of tensors. Throws `c10::Error` for another extension or when the
/// file cannot be written.
void save_state_dict(const torch::nn::Module& module, const std::string& path);

}  // namespace mha
