#include "linear/int8_linear.h"

#include <ATen/ATen.h>
#include <ATen/core/stack.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <limits>
#include <utility>

#include "linear/packed_linear.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

std::optional<c10::OperatorHandle> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchema({name, ""});
}

/// The qint8 tensor of rows [begin, begin + rows) of `weight`, zero points 0.
Tensor qint8_rows(const Int8Values& weight, int64_t begin, int64_t rows) {
  const Tensor values = weight.values.narrow(0, begin, rows).contiguous();
  if (weight.scales.dim() == 0) {
    return at::_make_per_tensor_quantized_tensor(values, weight.scales.item<double>(), 0);
  }
  const Tensor scales = weight.scales.narrow(0, begin, rows).contiguous();
  return at::_make_per_channel_quantized_tensor(values, scales, at::zeros_like(scales, at::kLong),
                                                /*axis=*/0);
}

/// Python's `torch.ao.quantization.MinMaxObserver(dtype=torch.qint8,
/// qscheme=torch.per_tensor_symmetric)`: scale = max(-min(w, 0), max(w, 0)) /
/// ((127 - -128) / 2), at least float32's epsilon, in float32.
double torch_ao_weight_scale(const Tensor& weight) {
  const auto [min_val, max_val] = at::aminmax(weight);
  const Tensor zero = at::zeros_like(min_val);
  const Tensor max_pos =
      at::maximum(at::neg(at::minimum(min_val, zero)), at::maximum(max_val, zero));
  const Tensor scale = at::maximum(max_pos / ((127.0 - -128.0) / 2),
                                   at::full({}, std::numeric_limits<float>::epsilon()));
  return scale.item<double>();
}

}  // namespace

Int8GemmOps::Int8GemmOps(const char* prepack_op,
                         const char* dynamic_op,
                         const char* unpack_op,
                         bool call_directly)
    : prepack_(find_op(prepack_op)),
      dynamic_(find_op(dynamic_op)),
      unpack_(find_op(unpack_op)),
      call_directly_(call_directly) {}

const Int8GemmOps& Int8GemmOps::fbgemm() {
  static const Int8GemmOps ops("quantized::linear_prepack", "quantized::linear_dynamic",
                               "quantized::linear_unpack");
  return ops;
}

std::string Int8GemmOps::unavailable_reason() const {
  if (!prepack_ || !dynamic_ || !unpack_) {
    return "this LibTorch does not register FBGEMM's quantized::linear_prepack, "
           "quantized::linear_dynamic and quantized::linear_unpack";
  }
  const at::QEngine engine = at::globalContext().qEngine();
  if (engine != at::QEngine::X86 && engine != at::QEngine::FBGEMM) {
    return fmt::format(
        "the quantized engine is {}, which does not pack linear weights for FBGEMM; expected x86 "
        "or fbgemm (at::globalContext().setQEngine)",
        c10::toString(engine));
  }
  return "";
}

namespace {

/// The packed object behind `packed`, or null when it is not ATen's
/// `LinearPackedParamsBase` (the type check is the custom class registry's).
c10::intrusive_ptr<LinearPackedParamsBase> packed_object(const c10::IValue& packed) {
  if (!packed.isObject()) return {};
  try {
    return packed.toCustomClass<LinearPackedParamsBase>();
  } catch (const c10::Error&) {
    return {};
  }
}

}  // namespace

PackedInt8Block Int8GemmOps::pack(const Tensor& qweight) const {
  // linear_prepack(Tensor W, Tensor? B=None) -> LinearPackedParamsBase
  torch::jit::Stack stack{qweight, c10::IValue()};
  prepack_->callBoxed(stack);
  PackedInt8Block block{stack.back(), {}};
  if (call_directly_) block.direct = packed_object(block.packed);
  return block;
}

Tensor Int8GemmOps::multiply(const Tensor& x,
                             const PackedInt8Block& block,
                             bool reduce_range) const {
  if (block.direct) {
    RECORD_FUNCTION("mha::int8_linear", std::vector<c10::IValue>({x}));
    return block.direct->apply_dynamic(x, reduce_range);  // linear_dynamic's body
  }
  // linear_dynamic(Tensor X, LinearPackedParamsBase W_prepack, bool reduce_range=False) -> Tensor
  torch::jit::Stack stack{x, block.packed, reduce_range};
  dynamic_->callBoxed(stack);
  return stack.back().toTensor();
}

Tensor Int8GemmOps::unpack(const PackedInt8Block& block) const {
  // linear_unpack(LinearPackedParamsBase W_prepack) -> (Tensor W_origin, Tensor? B_origin)
  torch::jit::Stack stack{block.packed};
  unpack_->callBoxed(stack);
  return stack.front().toTensor();
}

bool recipe_reduces_range(QuantizeRecipe recipe) {
  return recipe == QuantizeRecipe::kTorchAoDefault;
}

Int8Values quantize_weight(const Tensor& weight, QuantizeRecipe recipe) {
  if (recipe == QuantizeRecipe::kTorchAoDefault) {
    const double scale = torch_ao_weight_scale(weight);
    return {at::quantize_per_tensor(weight, scale, 0, at::kQInt8).int_repr(),
            at::full({}, scale, at::kDouble)};
  }
  // (out, in) -> (out): max|w_row| / 127 in float64
  const Tensor scales = at::amax(at::abs(weight), {1})
                            .to(at::kDouble)
                            .div(127.0)
                            .clamp_min(std::numeric_limits<float>::epsilon());
  const Tensor zero_points = at::zeros_like(scales, at::kLong);
  return {at::quantize_per_channel(weight, scales, zero_points, /*axis=*/0, at::kQInt8).int_repr(),
          scales};
}

Int8WeightImpl::Int8WeightImpl(const Int8Values& weight,
                               QuantizeRecipe recipe,
                               std::vector<int64_t> block_rows,
                               const Int8GemmOps& ops)
    : BlockedWeightModule(std::move(block_rows), weight.values.size(1)),
      scales_(weight.scales),
      recipe_(recipe),
      ops_(&ops) {
  int64_t begin = 0;
  for (const int64_t rows : block_rows_) {
    blocks_.push_back(ops.pack(qint8_rows(weight, begin, rows)));
    begin += rows;
  }
  TORCH_INTERNAL_ASSERT(begin == weight.values.size(0), "int8 blocks must cover the weight's rows");
}

void Int8WeightImpl::check_input(const Tensor& x) const {
  TORCH_CHECK(!is_training(),
              "int8 weights (mha::quantize_dynamic) compute in eval mode only: call eval() on "
              "the module");
  check_gemm_input(x);
}

Tensor Int8WeightImpl::multiply_block(int64_t block, const Tensor& x) const {
  if (x.size(0) == 0) {
    return at::empty({0, block_rows_[block]}, x.options());
  }
  return ops_->multiply(x, blocks_[block], recipe_reduces_range(recipe_));
}

Tensor Int8WeightImpl::forward_rows(int64_t begin,
                                    int64_t rows,
                                    const Tensor& x,
                                    const Tensor& bias) const {
  check_input(x);
  const Tensor flat = x.reshape({-1, in_features_}).contiguous();  // (..., in) -> (M, in)
  Tensor out = multiply_row_blocks(block_rows_, begin, rows, [&](int64_t block) {
    return multiply_block(block, flat);  // (M, rows of block)
  });
  if (bias.defined()) out.add_(bias);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = rows;
  return out.view(sizes);  // (..., rows)
}

Int8Values Int8WeightImpl::values() const {
  std::vector<Tensor> rows;
  for (const auto& block : blocks_) rows.push_back(ops_->unpack(block).int_repr());
  return {at::cat(rows, /*dim=*/0), scales_};  // blocks' (rows_i, in) -> (out, in)
}

std::shared_ptr<Int8WeightImpl> Int8WeightImpl::repacked(const Int8Values& weight) const {
  return std::make_shared<Int8WeightImpl>(weight, recipe_, block_rows_, *ops_);
}

void Int8WeightImpl::save(torch::serialize::OutputArchive& archive) const {
  const Int8Values v = values();
  archive.write("values", v.values, /*is_buffer=*/true);  // int8 (out, in)
  archive.write("scales", v.scales, /*is_buffer=*/true);  // float64 (out) or 0-d
  archive.write("block_rows", at::tensor(block_rows_, at::kLong), /*is_buffer=*/true);
  archive.write("recipe", at::scalar_tensor(static_cast<int64_t>(recipe_), at::kLong),
                /*is_buffer=*/true);
}

namespace {

/// What `Int8WeightImpl::save` wrote; throws unless it is an int8 weight of
/// (`out`, `in`) (`name` in the message).
struct ArchivedInt8 {
  Int8Values weight;
  std::vector<int64_t> block_rows;
  QuantizeRecipe recipe;
};

ArchivedInt8 read_int8(torch::serialize::InputArchive& archive,
                       int64_t out,
                       int64_t in,
                       const std::string& name) {
  ArchivedInt8 a;
  Tensor block_rows, recipe;
  archive.read("values", a.weight.values, /*is_buffer=*/true);
  archive.read("scales", a.weight.scales, /*is_buffer=*/true);
  archive.read("block_rows", block_rows, /*is_buffer=*/true);
  archive.read("recipe", recipe, /*is_buffer=*/true);
  TORCH_CHECK(a.weight.values.scalar_type() == at::kChar && a.weight.values.dim() == 2 &&
                  a.weight.values.size(0) == out && a.weight.values.size(1) == in,
              "torch::load: expected the archived int8 weight ", name, " of shape [", out, ", ", in,
              "], but got ", a.weight.values.sizes(), " of ",
              c10::toString(a.weight.values.scalar_type()));
  const Tensor rows = block_rows.contiguous();
  a.block_rows.assign(rows.data_ptr<int64_t>(), rows.data_ptr<int64_t>() + rows.numel());
  a.recipe = static_cast<QuantizeRecipe>(recipe.item<int64_t>());
  return a;
}

}  // namespace

void Int8WeightImpl::load(torch::serialize::InputArchive& archive) {
  const ArchivedInt8 a = read_int8(archive, out_features(), in_features_, name());
  const Int8WeightImpl loaded(a.weight, a.recipe, a.block_rows, *ops_);  // packed before any change
  blocks_ = loaded.blocks_;
  block_rows_ = loaded.block_rows_;
  scales_ = loaded.scales_;
  recipe_ = loaded.recipe_;
}

void Int8WeightImpl::check_archived(torch::serialize::InputArchive& archive,
                                    const std::string& name) const {
  read_int8(archive, out_features(), in_features_, name);
}

void Int8WeightImpl::pretty_print(std::ostream& stream) const {
  stream << fmt::format(
      "mha::Int8Weight(out_features={}, in_features={}, blocks={}, recipe={})", out_features(),
      in_features_, block_rows_,
      recipe_ == QuantizeRecipe::kPerChannel ? "per_channel" : "torch_ao_default");
}

std::shared_ptr<const WeightForm> linear_form(const torch::nn::LinearImpl& linear) {
  return is_placeholder(linear.weight) ? weight_form(linear, "weight") : nullptr;
}

Tensor linear_int8_or_packed(const torch::nn::LinearImpl& linear, const Tensor& x) {
  return linear_rows(x, linear.weight, linear.bias, linear_form(linear).get());
}

}  // namespace detail
}  // namespace mha
