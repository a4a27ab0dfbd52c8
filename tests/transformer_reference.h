#pragma once

// Reads the cases of scripts/export_transformer_reference.py and builds the
// matching mha module, constructed in Python's order from the case's options.

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mha {
namespace test {

/// Named tensors in the order Python wrote them.
using OrderedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// One case: what Python built, called and got.
struct TransformerCase {
  std::string name;
  std::string kind;  ///< encoder_layer, decoder_layer, encoder, decoder or transformer
  c10::impl::GenericDict options{c10::StringType::get(), c10::AnyType::get()};
  bool training = false;
  bool grad = false;
  std::string dtype;
  int64_t forward_seed = 0;
  std::optional<bool> is_causal;
  int64_t init_seed = 0;
  OrderedTensors init_state_dict;
  OrderedTensors state_dict;
  std::map<std::string, torch::Tensor> inputs;  ///< src/tgt/memory and masks
  torch::Tensor expected_output;
  torch::Tensor cotangent;                     ///< with grad
  std::map<std::string, torch::Tensor> grads;  ///< src/tgt/memory, param.<name>
};

/// Reads a case file; throws c10::Error naming the file on a bad magic or version.
TransformerCase read_transformer_case(const std::string& path);

/// The tensors of a `torch.save`d dict of tensors.
std::map<std::string, torch::Tensor> read_tensors(const std::string& path);

/// A module and its forward on the case's named inputs (masks absent = undefined).
struct BuiltModule {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const std::map<std::string, torch::Tensor>&)> forward;
};

/// The case's module, built in Python's construction order (float32).
BuiltModule build_module(const TransformerCase& reference);

}  // namespace test
}  // namespace mha
