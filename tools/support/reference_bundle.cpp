#include "reference_bundle.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/nn/utils.h>
#include <torch/serialize.h>

#include <fstream>

#include "dtype_names.h"
#include "file_bytes.h"

namespace mha {
namespace support {

using torch::Tensor;

namespace {

/// Typed access to a pickled dict, with errors that name the file and key.
class DictReader {
 public:
  DictReader(c10::impl::GenericDict dict, std::string where)
      : dict_(std::move(dict)), where_(std::move(where)) {}

  bool has(const std::string& key) const { return dict_.contains(key); }

  c10::IValue get(const std::string& key) const {
    TORCH_CHECK(has(key), fmt::format("{}: missing entry '{}'", where_, key));
    return dict_.at(key);
  }
  DictReader dict(const std::string& key) const {
    const auto value = get(key);
    TORCH_CHECK(value.isGenericDict(), fmt::format("{}: '{}' is not a dict", where_, key));
    return DictReader(value.toGenericDict(), where_ + "." + key);
  }
  int64_t integer(const std::string& key) const {
    const auto value = get(key);
    TORCH_CHECK(value.isInt(), fmt::format("{}: '{}' is not an int", where_, key));
    return value.toInt();
  }
  std::optional<int64_t> optional_integer(const std::string& key) const {
    const auto value = get(key);
    return value.isNone() ? std::nullopt : std::optional<int64_t>(value.toInt());
  }
  double real(const std::string& key) const {
    const auto value = get(key);
    TORCH_CHECK(value.isDouble() || value.isInt(),
                fmt::format("{}: '{}' is not a number", where_, key));
    return value.isDouble() ? value.toDouble() : static_cast<double>(value.toInt());
  }
  bool boolean(const std::string& key) const {
    const auto value = get(key);
    TORCH_CHECK(value.isBool(), fmt::format("{}: '{}' is not a bool", where_, key));
    return value.toBool();
  }
  std::string string(const std::string& key) const {
    const auto value = get(key);
    TORCH_CHECK(value.isString(), fmt::format("{}: '{}' is not a string", where_, key));
    return value.toStringRef();
  }
  /// Tensor entries in insertion order (Python's dict order).
  NamedTensors tensors() const {
    NamedTensors out;
    for (const auto& item : dict_) {
      TORCH_CHECK(item.value().isTensor(),
                  fmt::format("{}: '{}' is not a tensor", where_, item.key().toStringRef()));
      out.emplace_back(item.key().toStringRef(), item.value().toTensor());
    }
    return out;
  }
  std::map<std::string, Tensor> tensor_map() const {
    const auto list = tensors();
    return {list.begin(), list.end()};
  }

 private:
  c10::impl::GenericDict dict_;
  std::string where_;
};

}  // namespace

ReferenceCase read_reference_case(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  TORCH_CHECK(file, fmt::format("reference file {} cannot be opened; run `python "
                                "scripts/export_reference.py --out <dir>` to write it",
                                path));
  const c10::IValue root = torch::pickle_load(read_file_bytes(path));
  TORCH_CHECK(root.isGenericDict(), fmt::format("{}: expected a dict at the top level", path));
  const DictReader top(root.toGenericDict(), path);
  TORCH_CHECK(top.has("magic") && top.integer("magic") == kReferenceMagic,
              fmt::format("{}: bad magic, expected {}; not a file from export_reference.py", path,
                          kReferenceMagic));
  TORCH_CHECK(top.integer("version") == kReferenceVersion,
              fmt::format("{}: format version {}, expected {}; regenerate it", path,
                          top.integer("version"), kReferenceVersion));

  ReferenceCase ref;
  ref.name = top.string("name");
  const auto o = top.dict("options");
  ref.options = MultiheadAttentionOptions(o.integer("embed_dim"), o.integer("num_heads"))
                    .dropout(o.real("dropout"))
                    .bias(o.boolean("bias"))
                    .add_bias_kv(o.boolean("add_bias_kv"))
                    .add_zero_attn(o.boolean("add_zero_attn"))
                    .kdim(o.optional_integer("kdim"))
                    .vdim(o.optional_integer("vdim"))
                    .batch_first(o.boolean("batch_first"));
  const auto call = top.dict("call");
  ref.need_weights = call.boolean("need_weights");
  ref.average_attn_weights = call.boolean("average_attn_weights");
  ref.is_causal = call.boolean("is_causal");
  ref.training = call.boolean("training");
  ref.grad = call.boolean("grad");
  ref.qkv_identity = call.string("qkv_identity");
  ref.dtype = call.string("dtype");
  ref.forward_seed = call.integer("forward_seed");
  ref.python_kernel = call.string("python_kernel");
  ref.init_seed = top.integer("init_seed");
  ref.init_state_dict = top.dict("init_state_dict").tensors();
  ref.state_dict = top.dict("state_dict").tensors();
  ref.inputs = top.dict("inputs").tensor_map();
  ref.expected = top.dict("expected").tensor_map();
  if (top.has("grads")) {
    ref.grads = top.dict("grads").tensor_map();
    ref.cotangents = top.dict("cotangents").tensor_map();
  }
  if (top.has("timing")) {
    ref.python_median_us = top.dict("timing").real("python_median_us");
    ref.python_threads = top.dict("timing").integer("python_threads");
  }
  return ref;
}

MultiheadAttention make_module(const ReferenceCase& reference) {
  MultiheadAttention module(reference.options);
  module->to(dtype_from_name(reference.dtype));
  auto params = module->named_parameters();
  torch::NoGradGuard no_grad;
  for (const auto& [name, value] : reference.state_dict) {
    TORCH_CHECK(params.contains(name),
                fmt::format("{}: the module has no parameter '{}'", reference.name, name));
    params[name].copy_(value);
  }
  module->train(reference.training);
  return module;
}

std::tuple<Tensor, Tensor, Tensor> make_inputs(const ReferenceCase& reference,
                                               bool requires_grad,
                                               torch::Device device) {
  auto leaf = [&](const char* name) {
    return reference.inputs.at(name)
        .to(device, /*non_blocking=*/false, /*copy=*/true)
        .requires_grad_(requires_grad);
  };
  const Tensor query = leaf("query");
  if (reference.qkv_identity == "qkv") {
    return {query, query, query};
  }
  const Tensor key = leaf("key");
  if (reference.qkv_identity == "kv") {
    return {query, key, key};
  }
  return {query, key, leaf("value")};
}

}  // namespace support
}  // namespace mha
