// mha::quantize_dynamic: finds the weights to convert, checks and quantizes
// them all, then swaps them in (so an error changes nothing).

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <mha/multihead_attention.h>
#include <mha/quantization.h>
#include <mha/transformer.h>
#if defined(MHA_DISTRIBUTED)
#include <mha/tensor_parallel.h>
#endif

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "linear/int8_clone.h"
#include "linear/int8_linear.h"

namespace mha {
namespace {

using detail::Int8WeightImpl;
using torch::Tensor;

/// One weight parameter to convert: its owner, name, handle and row blocks.
struct Conversion {
  torch::nn::Module* owner;
  std::string param;
  Tensor* weight;
  std::vector<int64_t> block_rows;
  std::shared_ptr<Int8WeightImpl> int8;  // made by `quantize_all`
};

/// What `collect` found: the conversions, the problems (by dotted name), and
/// the stacks' new prototype layers, installed after the conversions.
struct Plan {
  std::vector<Conversion> conversions;
  std::vector<std::string> errors;
  std::vector<std::function<void()>> installs;
  std::set<const torch::nn::Module*> cross_attention;  // decoder layers' multihead_attn
};

void add_weight(Plan& plan,
                torch::nn::Module& owner,
                const std::string& prefix,
                const std::string& param,
                Tensor& weight,
                std::vector<int64_t> block_rows = {}) {
  if (!weight.defined() || detail::is_int8_placeholder(weight)) return;  // none, or converted
  if (weight.dim() != 2 || weight.scalar_type() != at::kFloat || !weight.device().is_cpu() ||
      weight.layout() != at::kStrided) {
    plan.errors.push_back(prefix + param + ": expected a 2-D float32 CPU weight, but got " +
                          c10::toString(weight.scalar_type()) + " of " +
                          std::to_string(weight.dim()) + " dimension(s) on " +
                          weight.device().str());
    return;
  }
  if (block_rows.empty()) block_rows = {weight.size(0)};
  plan.conversions.push_back({&owner, param, &weight, std::move(block_rows), nullptr});
}

/// `cross`: a decoder layer's cross-attention, whose query and memory are
/// projected apart (q, and [k; v] once), so its in_proj has two blocks.
void add_attention(Plan& plan,
                   MultiheadAttentionImpl& attn,
                   const std::string& prefix,
                   bool cross) {
  if (attn.in_proj_weight.defined()) {
    const int64_t part = attn.in_proj_weight.size(0) / 3;
    add_weight(plan, attn, prefix, "in_proj_weight", attn.in_proj_weight,
               cross ? std::vector<int64_t>{part, 2 * part} : std::vector<int64_t>{});
  }
  add_weight(plan, attn, prefix, "q_proj_weight", attn.q_proj_weight);
  add_weight(plan, attn, prefix, "k_proj_weight", attn.k_proj_weight);
  add_weight(plan, attn, prefix, "v_proj_weight", attn.v_proj_weight);
  add_weight(plan, *attn.out_proj, prefix + "out_proj.", "weight", attn.out_proj->weight);
}

void collect(Plan& plan,
             torch::nn::Module& module,
             const std::string& prefix,
             const QuantizeOptions& options);

/// A Transformer stack keeps the layer it was built from in its options
/// (LibTorch's options own it; `reset()` clones it): a float copy of every
/// layer's weights. A clone of it is converted too and replaces it, so the
/// stack holds no float weights and a layer the caller still holds is untouched.
template <typename Layer, typename Install>
void collect_prototype(Plan& plan,
                       const Layer& prototype,
                       const std::string& prefix,
                       const QuantizeOptions& options,
                       Install install) {
  auto copy = std::dynamic_pointer_cast<typename Layer::Impl>(prototype->clone());
  collect(plan, *copy, prefix + "(options' layer).", options);
  plan.installs.push_back([copy, install]() { install(Layer(copy)); });
}

/// Every weight `options` selects under `module` (dotted names from `prefix`).
void collect(Plan& plan,
             torch::nn::Module& module,
             const std::string& prefix,
             const QuantizeOptions& options) {
#if defined(MHA_DISTRIBUTED)  // else there is no tensor-parallel module to refuse
  if (dynamic_cast<TensorParallelMultiheadAttentionImpl*>(&module) != nullptr) {
    plan.errors.push_back((prefix.empty() ? std::string("the module") : prefix) +
                          ": tensor-parallel attention cannot be quantized");
    return;
  }
#endif
  if (auto* attn = dynamic_cast<MultiheadAttentionImpl*>(&module)) {
    if (options.attention())
      add_attention(plan, *attn, prefix, plan.cross_attention.count(attn) != 0);
    return;  // its out_proj is an attention projection, not one of the `linears`
  }
  if (auto* lin = dynamic_cast<torch::nn::LinearImpl*>(&module)) {
    if (options.linears()) add_weight(plan, *lin, prefix, "weight", lin->weight);
    return;
  }
  if (auto* layer = dynamic_cast<TransformerDecoderLayerImpl*>(&module)) {
    plan.cross_attention.insert(layer->multihead_attn.get());
  }
  if (auto* encoder = dynamic_cast<TransformerEncoderImpl*>(&module)) {
    collect_prototype(plan, encoder->options.encoder_layer(), prefix, options,
                      [encoder](TransformerEncoderLayer layer) {
                        encoder->options.encoder_layer(std::move(layer));
                      });
  }
  if (auto* decoder = dynamic_cast<TransformerDecoderImpl*>(&module)) {
    collect_prototype(plan, decoder->options.decoder_layer(), prefix, options,
                      [decoder](TransformerDecoderLayer layer) {
                        decoder->options.decoder_layer(std::move(layer));
                      });
  }
  for (const auto& child : module.named_children()) {
    collect(plan, *child.value(), prefix + child.key() + ".", options);
  }
}

void quantize_all(Plan& plan, QuantizeRecipe recipe) {
  torch::NoGradGuard no_grad;
  for (Conversion& c : plan.conversions) {
    c.int8 = std::make_shared<Int8WeightImpl>(detail::quantize_weight(*c.weight, recipe), recipe,
                                              c.block_rows);
  }
}

/// The swap: the int8 child in, the float weight's elements out; the owner's
/// parameters stop requiring grad (inference only).
void commit(const Conversion& c) {
  c.owner->register_module(detail::int8_child_name(c.param), c.int8);
  c.int8->train(c.owner->is_training());
  c.weight->set_data(at::empty({0}, c.weight->options()));
  for (auto& param : c.owner->parameters(/*recurse=*/false)) param.set_requires_grad(false);
}

}  // namespace

void quantize_dynamic(torch::nn::Module& module, const QuantizeOptions& options) {
  const std::string unavailable = detail::Int8GemmOps::fbgemm().unavailable_reason();
  TORCH_CHECK(unavailable.empty(),
              "quantize_dynamic: int8 weights need FBGEMM's dynamic linear: ", unavailable);
  Plan plan;
  collect(plan, module, "", options);
  if (!plan.errors.empty()) {
    std::string message = "quantize_dynamic: nothing was converted:";
    for (const auto& error : plan.errors) message += "\n\t" + error;
    TORCH_CHECK(false, message);
  }
  quantize_all(plan, options.recipe());
  for (const Conversion& c : plan.conversions) commit(c);
  for (const auto& install : plan.installs) install();
}

bool is_quantized(const torch::nn::Module& module) { return detail::holds_int8(module); }

torch::Tensor linear(const torch::nn::LinearImpl& linear, const torch::Tensor& x) {
  if (const auto int8 = detail::linear_int8(linear)) return int8->forward(x, linear.bias);
  return at::linear(x, linear.weight, linear.bias);  // LinearImpl::forward's F::linear
}

}  // namespace mha
