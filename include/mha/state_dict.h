#pragma once

// Loading and saving the weights of any LibTorch module by their dotted names,
// from the files PyTorch users have: `torch.save(model.state_dict())` archives,
// `.safetensors` files and TorchScript archives.

#include <c10/util/Exception.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
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
/// empty after a strict load, except `skipped_paths`.
struct LoadResult {
  /// The module's parameter and buffer names the file did not provide.
  std::vector<std::string> missing_keys;
  /// The (selected, renamed) file keys the module has no parameter or buffer for.
  std::vector<std::string> unexpected_keys;
  /// The paths of the file's tensors that have no name (`ReadResult::skipped`),
  /// wherever they are in the file (not only under the prefix).
  std::vector<std::string> skipped_paths;
};

/// What `read_state_dict_with_report` found in a file.
struct ReadResult {
  /// Every tensor that has a name (naming rules: `read_state_dict`).
  std::map<std::string, torch::Tensor> tensors;
  /// The entries that held tensors but have no name, in file order: the
  /// dotted name of their container, then `<set item>` for a set element, or
  /// `<bool key>`, `<float key>`, `<tuple key>`, `<None key>`, `<bytes key>`,
  /// `<other key>` for a dict entry whose key is neither a `str` nor an `int`
  /// (e.g. `extra.<tuple key>`). Only torch.save archives have any.
  std::vector<std::string> skipped;
};

/// Reads every tensor of a weights file into CPU tensors by name. The format is
/// detected from the content, not the name:
/// - `torch.save` archives (PyTorch 1.6+ zip format): whatever
///   `torch.load(path, weights_only=True)` reads, from `model.state_dict()` to
///   a training checkpoint (`{"model": ..., "optimizer": opt.state_dict(),
///   "epoch": 3}`); tensors saved from CUDA load to the CPU, views of one
///   storage stay views of one storage;
/// - `.safetensors` files;
/// - TorchScript archives (`torch.jit.save`): their named parameters and buffers.
///
/// Naming rules (torch.save archives), from the saved object down:
/// - a tensor (or `nn.Parameter`) gets the dotted path that leads to it: a
///   `str` dict key as it is, an `int` dict key as its decimal text, a list or
///   tuple element by its index; `OrderedDict` and `Counter` are dicts. So
///   `{"model": sd, "optimizer": opt.state_dict()}` gives `model.<key>` and
///   `optimizer.state.0.exp_avg`; a tensor saved alone gets the name "";
/// - values that are not tensors (numbers, strings, dtypes, `torch.Size`, ...)
///   are skipped silently;
/// - tensors reachable only through a dict key of another type (`bool`,
///   `float`, `tuple`, `None`, `bytes`, ...) or inside a `set` are skipped and
///   reported (`read_state_dict_with_report`, `LoadResult::skipped_paths`);
/// - a tensor shared between entries gets each name, as views of one storage;
/// - two paths that give the same name (`{0: a, "0": b}`) are an error naming
///   both.
///
/// Throws `c10::Error` naming the file and the problem: missing file, unknown
/// format, "corrupt" content (truncated, out of bounds, inconsistent) or
/// "unsupported" content (a whole module saved with `torch.save(model)`, a
/// global outside the weights-only allow-list, sparse or quantized tensors);
/// pickle errors also name the record (`data.pkl`) and the opcode's offset.
std::map<std::string, torch::Tensor> read_state_dict(const std::string& path);

/// `read_state_dict`, plus the paths of the tensors the naming rules skipped.
ReadResult read_state_dict_with_report(const std::string& path);

/// The tensors `load_state_dict` would load from `state_dict`: the keys under
/// `options.prefix()` (a missing final '.' is added), prefix stripped, renamed
/// by `options.key_map()`. Throws `c10::Error` starting with `source` when the
/// prefix matches no key or two keys get one name.
std::map<std::string, torch::Tensor> select_state_dict(
    const std::map<std::string, torch::Tensor>& state_dict,
    const LoadOptions& options,
    const std::string& source = "state_dict");

/// Python's `module.load_state_dict(torch.load(path))` for any LibTorch
/// module: parameters and buffers are matched by their full dotted names
/// (`named_parameters()`/`named_buffers()`), values are converted as by
/// `copy_` (dtype and device of the module's tensors are kept). An int8
/// weight (`mha::quantize_dynamic`) takes float values, quantized by its
/// recipe, or int8 values with their `<name>_scale`.
///
/// The result also lists the file's skipped tensors (`LoadResult::skipped_paths`).
/// Everything is validated before anything is copied: on error the module is
/// unchanged, and the `c10::Error` lists all problems at once (missing and
/// unexpected keys when `strict`, shape mismatches with expected and actual
/// shapes, a prefix that matches no key).
///
/// A strict load that fails on a file with attention blocks elsewhere (a
/// whole model, a prefix that matches nothing, timm's names, other kdim/vdim)
/// says where they are and what to change: the prefix ("did you mean ..."),
/// `KeyMap::vit()`, the options; long key lists are shortened with a count.
///
/// Example:
/// ```
/// mha::MultiheadAttention attn(512, 8);
/// mha::load_state_dict(attn, "encoder_layer.pt", mha::LoadOptions().prefix("self_attn."));
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
/// then its children), detached (sharing storage with the module). A weight
/// converted by `mha::quantize_dynamic` is `<name>` (int8) then `<name>_scale`
/// (float64), copies unpacked from its int8 form (docs/quantization.md); one
/// converted by `mha::prepack` is `<name>`, its float32 values unpacked bit
/// for bit (a copy). Loading float values into either converts them.
std::vector<std::pair<std::string, torch::Tensor>> state_dict(const torch::nn::Module& module);

/// Writes the module's `state_dict` (as CPU tensors). The format follows the
/// file name: `.safetensors`, or `.pt`/`.pth`/`.bin` for a `torch.save`-format
/// archive that Python reads with `torch.load(path, weights_only=True)` as a
/// `dict` of tensors. Throws `c10::Error` for another extension or when the
/// file cannot be written.
void save_state_dict(const torch::nn::Module& module, const std::string& path);

// The same for module holders (`mha::MultiheadAttention`, the Transformer
// classes, `torch::nn::Linear`, ...): `load_state_dict(attn, ...)` as well as
// `load_state_dict(*attn, ...)`. An empty holder (built from `nullptr`) is a
// `c10::ValueError`.

/// `load_state_dict` of a file into the module `module` holds.
template <typename ModuleType>
LoadResult load_state_dict(const torch::nn::ModuleHolder<ModuleType>& module,
                           const std::string& path,
                           const LoadOptions& options = {}) {
  TORCH_CHECK_VALUE(!module.is_empty(), path,
                    ": expected module to hold a module, but got an empty holder (nullptr)");
  return load_state_dict(*module.ptr(), path, options);
}

/// `load_state_dict` of tensors in memory into the module `module` holds.
template <typename ModuleType>
LoadResult load_state_dict(const torch::nn::ModuleHolder<ModuleType>& module,
                           const std::map<std::string, torch::Tensor>& state_dict,
                           const LoadOptions& options = {},
                           const std::string& source = "state_dict") {
  TORCH_CHECK_VALUE(!module.is_empty(), source,
                    ": expected module to hold a module, but got an empty holder (nullptr)");
  return load_state_dict(*module.ptr(), state_dict, options, source);
}

/// `state_dict` of the module `module` holds.
template <typename ModuleType>
std::vector<std::pair<std::string, torch::Tensor>> state_dict(
    const torch::nn::ModuleHolder<ModuleType>& module) {
  TORCH_CHECK_VALUE(!module.is_empty(),
                    "expected module to hold a module, but got an empty holder (nullptr)");
  return state_dict(*module.ptr());
}

/// `save_state_dict` of the module `module` holds.
template <typename ModuleType>
void save_state_dict(const torch::nn::ModuleHolder<ModuleType>& module, const std::string& path) {
  TORCH_CHECK_VALUE(!module.is_empty(), path,
                    ": expected module to hold a module, but got an empty holder (nullptr)");
  save_state_dict(*module.ptr(), path);
}

}  // namespace mha
