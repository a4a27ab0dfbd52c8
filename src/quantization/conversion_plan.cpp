#include "quantization/conversion_plan.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <mha/multihead_attention.h>
#include <mha/transformer_coder.h>
#if defined(MHA_DISTRIBUTED)
#include <mha/tensor_parallel.h>
#endif

#include <utility>

#include "linear/weight_form.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

/// What `collect` found: the plan, the problems (by dotted name), and the
/// decoder layers' cross-attention modules met on the way.
struct Collected {
  const ConversionSelection& selection;
  ConversionPlan plan;
  std::vector<std::string> errors;
  std::set<const torch::nn::Module*> cross_attention;  // decoder layers' multihead_attn
};

void add_weight(Collected& plan,
                torch::nn::Module& owner,
                const std::string& prefix,
                const std::string& param,
                Tensor& weight,
                bool q_then_kv = false) {
  if (!weight.defined()) return;
  std::string replaced;  // a prepacked form converted again
  Tensor values = weight;
  if (is_placeholder(weight)) {  // converted: left as it is, but prepacked `from_prepacked`
    if (!plan.selection.from_prepacked) return;
    const auto form = weight_form(owner, param);
    const auto floats = form ? form->float_weight() : std::nullopt;  // unpacked: a copy
    if (!floats) return;
    replaced = param + "_packed";
    values = *floats;
  }
  if (values.dim() != 2 || values.scalar_type() != at::kFloat || !values.device().is_cpu() ||
      values.layout() != at::kStrided) {
    plan.errors.push_back(prefix + param + ": expected a 2-D float32 CPU weight, but got " +
                          c10::toString(values.scalar_type()) + " of " +
                          std::to_string(values.dim()) + " dimension(s) on " +
                          values.device().str());
    return;
  }
  const int64_t rows = values.size(0);
  std::vector<int64_t> block_rows =
      q_then_kv ? std::vector<int64_t>{rows / 3, rows - rows / 3} : std::vector<int64_t>{rows};
  plan.plan.conversions.push_back(
      {&owner, param, &weight, values, std::move(block_rows), replaced, nullptr});
}

/// `cross`: a decoder layer's cross-attention, whose query and memory are
/// projected apart (q, and [k; v] once), so its in_proj has two blocks.
void add_attention(Collected& plan,
                   MultiheadAttentionImpl& attn,
                   const std::string& prefix,
                   bool cross) {
  add_weight(plan, attn, prefix, "in_proj_weight", attn.in_proj_weight, cross);
  add_weight(plan, attn, prefix, "q_proj_weight", attn.q_proj_weight);
  add_weight(plan, attn, prefix, "k_proj_weight", attn.k_proj_weight);
  add_weight(plan, attn, prefix, "v_proj_weight", attn.v_proj_weight);
  add_weight(plan, *attn.out_proj, prefix + "out_proj.", "weight", attn.out_proj->weight);
}

void collect(Collected& plan, torch::nn::Module& module, const std::string& prefix);

/// A Transformer stack keeps the layer it was built from in its options
/// (LibTorch's options own it; `reset()` clones it): a float copy of every
/// layer's weights. A clone of it is converted too and replaces it, so the
/// stack holds no float weights and a layer the caller still holds is untouched.
template <typename Layer, typename Install>
void collect_prototype(Collected& plan,
                       const Layer& prototype,
                       const std::string& prefix,
                       Install install) {
  auto copy = std::dynamic_pointer_cast<typename Layer::Impl>(prototype->clone());
  collect(plan, *copy, prefix + "(options' layer).");
  plan.plan.installs.push_back([copy, install]() { install(Layer(copy)); });
}

/// Every weight the plan's selection takes under `module` (dotted names from `prefix`).
void collect(Collected& plan, torch::nn::Module& module, const std::string& prefix) {
#if defined(MHA_DISTRIBUTED)  // else there is no tensor-parallel module to refuse
  if (dynamic_cast<TensorParallelMultiheadAttentionImpl*>(&module) != nullptr) {
    plan.errors.push_back((prefix.empty() ? std::string("the module") : prefix) +
                          ": tensor-parallel attention cannot be converted");
    return;
  }
#endif
  if (auto* attn = dynamic_cast<MultiheadAttentionImpl*>(&module)) {
    if (plan.selection.attention)
      add_attention(plan, *attn, prefix, plan.cross_attention.count(attn) != 0);
    return;  // its out_proj is an attention projection, not one of the `linears`
  }
  if (auto* lin = dynamic_cast<torch::nn::LinearImpl*>(&module)) {
    if (plan.selection.linears) add_weight(plan, *lin, prefix, "weight", lin->weight);
    return;
  }
  if (auto* layer = dynamic_cast<TransformerDecoderLayerImpl*>(&module)) {
    plan.cross_attention.insert(layer->multihead_attn.get());
  }
  if (auto* encoder = dynamic_cast<TransformerEncoderImpl*>(&module)) {
    collect_prototype(plan, encoder->options.encoder_layer(), prefix,
                      [encoder](TransformerEncoderLayer layer) {
                        encoder->options.encoder_layer(std::move(layer));
                      });
  }
  if (auto* decoder = dynamic_cast<TransformerDecoderImpl*>(&module)) {
    collect_prototype(plan, decoder->options.decoder_layer(), prefix,
                      [decoder](TransformerDecoderLayer layer) {
                        decoder->options.decoder_layer(std::move(layer));
                      });
  }
  for (const auto& child : module.named_children()) {
    collect(plan, *child.value(), prefix + child.key() + ".");
  }
}

}  // namespace

ConversionPlan plan_conversion(torch::nn::Module& module, const ConversionSelection& selection) {
  Collected collected{selection, {}, {}, {}};
  collect(collected, module, "");
  if (!collected.errors.empty()) {
    std::string message = selection.caller + ": nothing was converted:";
    for (const auto& error : collected.errors) message += "\n\t" + error;
    TORCH_CHECK(false, message);
  }
  return std::move(collected.plan);
}

void commit(const ConversionPlan& plan, const std::string& suffix) {
  for (const Conversion& c : plan.conversions) {
    if (!c.replaced_form.empty()) c.owner->unregister_module(c.replaced_form);
    c.owner->register_module(c.param + suffix, c.form);
    c.form->train(c.owner->is_training());
    c.weight->set_data(at::empty({0}, c.weight->options()));
    for (auto& param : c.owner->parameters(/*recurse=*/false)) param.set_requires_grad(false);
  }
  for (const auto& install : plan.installs) install();
}

}  // namespace detail
}  // namespace mha
