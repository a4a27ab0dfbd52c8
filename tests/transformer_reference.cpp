#include "transformer_reference.h"

#include <mha/transformer.h>
#include <torch/serialize.h>

#include <fstream>

#include "file_bytes.h"

namespace mha {
namespace test {

using torch::Tensor;

namespace {

constexpr int64_t kMagic = 20261201;
constexpr int64_t kVersion = 1;

c10::impl::GenericDict load_dict(const std::string& path) {
  return torch::pickle_load(mha::support::read_file_bytes(path)).toGenericDict();
}

OrderedTensors ordered(const c10::IValue& dict) {
  OrderedTensors out;
  for (const auto& item : dict.toGenericDict()) {
    out.emplace_back(item.key().toStringRef(), item.value().toTensor());
  }
  return out;
}

std::map<std::string, Tensor> mapped(const c10::IValue& dict) {
  const auto list = ordered(dict);
  return {list.begin(), list.end()};
}

TransformerLayerOptions layer_options(const c10::impl::GenericDict& o) {
  const std::string activation = o.at("activation").toStringRef();
  TransformerActivation act = torch::kReLU;
  if (activation == "gelu") act = torch::kGELU;
  // The export's callable: `lambda x: F.gelu(x, approximate="tanh")`.
  if (activation == "callable") act = [](const Tensor& x) { return at::gelu(x, "tanh"); };
  return TransformerLayerOptions(o.at("d_model").toInt(), o.at("nhead").toInt())
      .dim_feedforward(o.at("dim_feedforward").toInt())
      .dropout(o.at("dropout").toDouble())
      .activation(act)
      .layer_norm_eps(o.at("layer_norm_eps").toDouble())
      .batch_first(o.at("batch_first").toBool())
      .norm_first(o.at("norm_first").toBool())
      .bias(o.at("bias").toBool());
}

/// The named input, or an undefined tensor (Python's None).
Tensor get(const std::map<std::string, Tensor>& in, const std::string& name) {
  const auto it = in.find(name);
  return it == in.end() ? Tensor() : it->second;
}

torch::nn::AnyModule final_norm(const TransformerCase& ref) {
  const auto& o = ref.options;
  if (!o.at("final_norm").toBool()) return {};
  return torch::nn::AnyModule(LayerNorm(LayerNormOptions({o.at("d_model").toInt()})
                                            .eps(o.at("layer_norm_eps").toDouble())
                                            .bias(o.at("bias").toBool())));
}

BuiltModule build_stack(const TransformerCase& ref) {
  const auto& o = ref.options;
  const auto lo = layer_options(o);
  const int64_t n = o.at("num_layers").toInt();
  if (ref.kind == "encoder") {
    TransformerEncoderLayer layer(lo);
    TransformerEncoder m(TransformerEncoderOptions(layer, n)
                             .norm(final_norm(ref))
                             .enable_nested_tensor(o.at("enable_nested_tensor").toBool())
                             .mask_check(o.at("mask_check").toBool()));
    return {m.ptr(), [m, ref](const std::map<std::string, Tensor>& in) mutable {
              return m(in.at("src"), get(in, "src_mask"), get(in, "src_key_padding_mask"),
                       ref.is_causal);
            }};
  }
  if (ref.kind == "decoder") {
    TransformerDecoderLayer layer(lo);
    TransformerDecoder m(TransformerDecoderOptions(layer, n).norm(final_norm(ref)));
    return {m.ptr(), [m, ref](const std::map<std::string, Tensor>& in) mutable {
              return m(in.at("tgt"), in.at("memory"), get(in, "tgt_mask"), get(in, "memory_mask"),
                       get(in, "tgt_key_padding_mask"), get(in, "memory_key_padding_mask"),
                       ref.is_causal);
            }};
  }
  TORCH_CHECK(ref.kind == "transformer", "unknown kind ", ref.kind);
  Transformer m(TransformerOptions(lo.d_model(), lo.nhead(), n, n)
                    .dim_feedforward(lo.dim_feedforward())
                    .dropout(lo.dropout())
                    .activation(lo.activation())
                    .layer_norm_eps(lo.layer_norm_eps())
                    .batch_first(lo.batch_first())
                    .norm_first(lo.norm_first())
                    .bias(lo.bias()));
  return {m.ptr(), [m, ref](const std::map<std::string, Tensor>& in) mutable {
            return m(in.at("src"), in.at("tgt"), get(in, "src_mask"), get(in, "tgt_mask"),
                     get(in, "memory_mask"), get(in, "src_key_padding_mask"),
                     get(in, "tgt_key_padding_mask"), get(in, "memory_key_padding_mask"),
                     ref.is_causal, ref.is_causal);
          }};
}

}  // namespace

TransformerCase read_transformer_case(const std::string& path) {
  const auto top = load_dict(path);
  TORCH_CHECK(top.at("magic").toInt() == kMagic && top.at("version").toInt() == kVersion, path,
              ": not a transformer reference case of version ", kVersion);
  TransformerCase ref;
  ref.name = top.at("name").toStringRef();
  ref.kind = top.at("kind").toStringRef();
  ref.options = top.at("options").toGenericDict();
  const auto call = top.at("call").toGenericDict();
  ref.training = call.at("training").toBool();
  ref.grad = call.at("grad").toBool();
  ref.dtype = call.at("dtype").toStringRef();
  ref.forward_seed = call.at("forward_seed").toInt();
  const auto is_causal = call.at("is_causal");
  if (!is_causal.isNone()) ref.is_causal = is_causal.toBool();
  ref.init_seed = top.at("init_seed").toInt();
  ref.init_state_dict = ordered(top.at("init_state_dict"));
  ref.state_dict = ordered(top.at("state_dict"));
  ref.inputs = mapped(top.at("inputs"));
  ref.expected_output = top.at("expected").toGenericDict().at("output").toTensor();
  if (ref.grad) {
    ref.cotangent = top.at("cotangent").toTensor();
    ref.grads = mapped(top.at("grads"));
  }
  return ref;
}

std::map<std::string, Tensor> read_tensors(const std::string& path) {
  return mapped(load_dict(path));
}

BuiltModule build_module(const TransformerCase& ref) {
  const bool causal = ref.is_causal.value_or(false);  // layers: Python's bool argument
  if (ref.kind == "encoder_layer") {
    TransformerEncoderLayer m(layer_options(ref.options));
    return {m.ptr(), [m, causal](const std::map<std::string, Tensor>& in) mutable {
              return m(in.at("src"), get(in, "src_mask"), get(in, "src_key_padding_mask"), causal);
            }};
  }
  if (ref.kind == "decoder_layer") {
    TransformerDecoderLayer m(layer_options(ref.options));
    return {m.ptr(), [m, causal](const std::map<std::string, Tensor>& in) mutable {
              return m(in.at("tgt"), in.at("memory"), get(in, "tgt_mask"), get(in, "memory_mask"),
                       get(in, "tgt_key_padding_mask"), get(in, "memory_key_padding_mask"), causal);
            }};
  }
  return build_stack(ref);
}

}  // namespace test
}  // namespace mha
