#include "mha/multihead_attention.h"

#include "mha/functional.h"

#include "input_checks.h"
#include "sdpa_inference.h"
#include "shape_format.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/nn/init.h>

#include <atomic>
#include <string>
#include <utility>

namespace mha {

using torch::Tensor;
namespace F = mha::functional;

namespace {

std::atomic<bool> fastpath_enabled{true};

std::optional<c10::ScalarType> dtype_or_none(const Tensor& t) {
  return t.defined() ? std::optional<c10::ScalarType>(t.scalar_type()) : std::nullopt;
}

/// Checks beyond Python's own (which the functional form repeats): dtypes and
/// devices agree with each other and with the parameters, feature sizes match
/// kdim/vdim, batch and sequence sizes agree, and the masks have valid shapes.
/// Python reports most of these from deep inside a matmul or view; we report
/// them by argument name before any work is done.
void check_inputs(
    const MultiheadAttentionOptions& options,
    const Tensor& parameter,
    const Tensor& query,
    const Tensor& key,
    const Tensor& value,
    const Tensor& key_padding_mask,
    const Tensor& attn_mask) {
  for (const auto& [t, name] : {std::pair<const Tensor&, const char*>{query, "query"},
                                 std::pair<const Tensor&, const char*>{key, "key"},
                                 std::pair<const Tensor&, const char*>{value, "value"}}) {
    TORCH_CHECK(
        t.defined(), fmt::format("expected {} to be a defined tensor, but got an undefined one", name));
  }
  const bool is_batched = detail::mha_shape_check(
      query, key, value, key_padding_mask, attn_mask, options.num_heads());

  auto check_same = [&](const Tensor& t, const char* name) {
    TORCH_CHECK_TYPE(
        t.scalar_type() == parameter.scalar_type(),
        fmt::format(
            "expected {} to have the parameters' dtype {}, but got {}; convert the input or "
            "call module->to(dtype)",
            name,
            c10::toString(parameter.scalar_type()),
            c10::toString(t.scalar_type())));
    TORCH_CHECK(
        t.device() == parameter.device(),
        fmt::format(
            "expected {} on the parameters' device {}, but got {}; move the input or call "
            "module->to(device)",
            name,
            parameter.device().str(),
            t.device().str()));
  };
  check_same(query, "query");
  check_same(key, "key");
  check_same(value, "value");
  for (const auto& [mask, name] :
       {std::pair<const Tensor&, const char*>{key_padding_mask, "key_padding_mask"},
        std::pair<const Tensor&, const char*>{attn_mask, "attn_mask"}}) {
    TORCH_CHECK(
        !mask.defined() || mask.device() == query.device(),
        fmt::format(
            "expected {} on the query's device {}, but got {}",
            name,
            query.device().str(),
            mask.device().str()));
  }

  const int64_t embed_dim = options.embed_dim();
  const int64_t kdim = options.kdim().value_or(embed_dim);
  const int64_t vdim = options.vdim().value_or(embed_dim);
  TORCH_CHECK(
      query.size(-1) == embed_dim,
      fmt::format("was expecting embedding dimension of {}, but got {}", embed_dim, query.size(-1)));
  TORCH_CHECK(
      key.size(-1) == kdim,
      fmt::format("expected key feature size (kdim) {}, but got {}", kdim, key.size(-1)));
  TORCH_CHECK(
      value.size(-1) == vdim,
      fmt::format("expected value feature size (vdim) {}, but got {}", vdim, value.size(-1)));

  // Sequence-first view of the sizes: L, N, S.
  const bool batch_first = is_batched && options.batch_first();
  const int64_t seq_dim = batch_first ? 1 : 0;
  const int64_t tgt_len = query.size(seq_dim);
  const int64_t src_len = key.size(seq_dim);
  const int64_t bsz = is_batched ? query.size(batch_first ? 0 : 1) : 1;
  if (is_batched) {
    const int64_t key_bsz = key.size(batch_first ? 0 : 1);
    const int64_t value_bsz = value.size(batch_first ? 0 : 1);
    TORCH_CHECK(
        key_bsz == bsz && value_bsz == bsz,
        fmt::format(
            "expected key and value batch size {} (the query's), but got key {} and value {}",
            bsz,
            key_bsz,
            value_bsz));
  }
  TORCH_CHECK(
      value.size(seq_dim) == src_len,
      fmt::format(
          "expected value sequence length {} (the key's), but got {}", src_len, value.size(seq_dim)));

  if (attn_mask.defined()) {
    detail::check_attn_mask_shape(attn_mask, tgt_len, src_len, bsz * options.num_heads());
  }
  if (key_padding_mask.defined()) {
    if (is_batched) {
      detail::check_key_padding_mask_shape(key_padding_mask, src_len, bsz);
    } else {
      TORCH_CHECK(
          key_padding_mask.size(0) == src_len,
          fmt::format(
              "Expected key_padded_mask.shape[0] to be {}, but got {}",
              src_len,
              key_padding_mask.size(0)));
    }
  }
}

/// Python's `why_not_fast_path`: empty when Python's module would call
/// `at::_native_multi_head_attention`, else the first reason, in Python's order
/// and wording. Masks are judged as given: a float mask blocks the fast path
/// (as in Python), and so does any other non-bool dtype, which the slow path
/// then rejects with Python's error.
std::string why_not_fast_path_reason(
    const MultiheadAttentionImpl& m,
    const Tensor& query,
    const Tensor& key,
    const Tensor& value,
    const Tensor& key_padding_mask,
    const Tensor& attn_mask) {
  const auto& o = m.options;
  const int64_t embed_dim = o.embed_dim();
  auto not_bool = [](const Tensor& mask) {
    return mask.defined() && mask.scalar_type() != at::kBool;
  };
  if (not_bool(attn_mask) || not_bool(key_padding_mask)) {
    return "floating-point masks are not supported for fast path.";
  }
  if (!get_fastpath_enabled()) {
    return "torch.backends.mha.get_fastpath_enabled() was not True";
  }
  if (query.dim() != 3) {
    return fmt::format("input not batched; expected query.dim() of 3 but got {}", query.dim());
  }
  if (!query.is_same(key) || !key.is_same(value)) {
    return "non-self attention was used (query, key, and value are not the same Tensor)";
  }
  if (m.in_proj_bias.defined() && query.scalar_type() != m.in_proj_bias.scalar_type()) {
    return "dtypes of query and self.in_proj_bias don't match";
  }
  if (!m.in_proj_weight.defined()) return "in_proj_weight was None";
  if (query.scalar_type() != m.in_proj_weight.scalar_type()) {
    return "dtypes of query and self.in_proj_weight don't match";
  }
  if (m.is_training()) return "training is enabled";
  if (o.num_heads() % 2 != 0) return "self.num_heads is not even";
  if (!o.batch_first()) return "batch_first was not True";
  if (m.bias_k.defined()) return "self.bias_k was not None";
  if (m.bias_v.defined()) return "self.bias_v was not None";
  if (o.add_zero_attn()) return "add_zero_attn was enabled";
  if (o.kdim().value_or(embed_dim) != embed_dim || o.vdim().value_or(embed_dim) != embed_dim) {
    return "_qkv_same_embed_dim was not True";
  }
  if (query.is_nested() && (key_padding_mask.defined() || attn_mask.defined())) {
    return "supplying both src_key_padding_mask and src_mask at the same time is not supported "
           "with NestedTensor input";
  }
  if (at::autocast::is_autocast_enabled(at::kCUDA)) return "autocast is enabled";

  bool needs_grad = false;
  for (const Tensor* t : {&query, &m.in_proj_weight, &m.in_proj_bias, &m.out_proj->weight,
                          &m.out_proj->bias}) {
    if (!t->defined()) continue;
    const auto type = t->device().type();
    if (type != c10::DeviceType::CPU && type != c10::DeviceType::CUDA &&
        type != c10::DeviceType::PrivateUse1) {
      return "some Tensor argument's device is neither one of cpu, cuda or privateuse1";
    }
    needs_grad = needs_grad || t->requires_grad();
  }
  if (torch::GradMode::is_enabled() && needs_grad) {
    return "grad is enabled and at least one of query or the input/output projection weights or "
           "biases requires_grad";
  }
  return "";
}

/// Python's native fast path exactly as Python calls it: masks canonicalised
/// to float and merged by `merge_masks` (kpm alone (N, S), type 1; any
/// attn_mask expanded to (N, H, L, L), type 2).
std::tuple<Tensor, Tensor> python_native_fast_path(
    const MultiheadAttentionImpl& m,
    const Tensor& query,
    const Tensor& key_padding_mask,
    const Tensor& attn_mask,
    bool need_weights,
    bool average_attn_weights) {
  const auto dtype = query.scalar_type();
  const Tensor kpm = F::canonical_mask(
      key_padding_mask, "key_padding_mask", dtype_or_none(attn_mask), "attn_mask", dtype);
  const Tensor mask = F::canonical_mask(attn_mask, "attn_mask", std::nullopt, "", dtype, false);
  const int64_t num_heads = m.options.num_heads();
  std::optional<Tensor> merged;
  std::optional<int64_t> mask_type;
  if (kpm.defined()) {
    merged = kpm;
    mask_type = 1;
  }
  if (mask.defined()) {
    const int64_t batch_size = query.size(0), seq_len = query.size(1);
    mask_type = 2;
    merged = mask.dim() == 3
        ? mask.view({batch_size, -1, seq_len, seq_len})
        : mask.view({1, 1, seq_len, seq_len}).expand({batch_size, num_heads, -1, -1});
    if (kpm.defined()) {
      merged = *merged + kpm.view({batch_size, 1, 1, seq_len}).expand({-1, num_heads, -1, -1});
    }
  }
  return at::_native_multi_head_attention(
      query, query, query, m.options.embed_dim(), num_heads, m.in_proj_weight, m.in_proj_bias,
      m.out_proj->weight, m.out_proj->bias, merged, need_weights, average_attn_weights, mask_type);
}

}  // namespace

MultiheadAttentionOptions::MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads)
    : embed_dim_(embed_dim), num_heads_(num_heads) {}

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions& options_)
    : torch::nn::Cloneable<MultiheadAttentionImpl>("mha::MultiheadAttention"), options(options_) {
  reset();
}

bool MultiheadAttentionImpl::qkv_same_embed_dim() const {
  const int64_t embed_dim = options.embed_dim();
  return options.kdim().value_or(embed_dim) == embed_dim &&
      options.vdim().value_or(embed_dim) == embed_dim;
}

void MultiheadAttentionImpl::reset() {
  const int64_t embed_dim = options.embed_dim();
  const int64_t num_heads = options.num_heads();
  TORCH_CHECK_VALUE(
      embed_dim > 0 && num_heads > 0,
      fmt::format(
          "embed_dim and num_heads must be greater than 0, got embed_dim={} and num_heads={} "
          "instead",
          embed_dim,
          num_heads));
  TORCH_CHECK_VALUE(
      embed_dim % num_heads == 0,
      fmt::format(
          "embed_dim must be divisible by num_heads, got embed_dim={} and num_heads={}",
          embed_dim,
          num_heads));
  TORCH_CHECK_VALUE(
      options.dropout() >= 0.0 && options.dropout() <= 1.0,
      fmt::format(
          "dropout probability has to be between 0 and 1, but got {}", options.dropout()));
  const int64_t kdim = options.kdim().value_or(embed_dim);
  const int64_t vdim = options.vdim().value_or(embed_dim);
  TORCH_CHECK_VALUE(
      kdim > 0 && vdim > 0,
      fmt::format("kdim and vdim must be greater than 0, got kdim={} and vdim={}", kdim, vdim));

  // Registration order is Python's, so named_parameters() == state_dict() order.
  if (!qkv_same_embed_dim()) {
    q_proj_weight = register_parameter("q_proj_weight", torch::empty({embed_dim, embed_dim}));
    k_proj_weight = register_parameter("k_proj_weight", torch::empty({embed_dim, kdim}));
    v_proj_weight = register_parameter("v_proj_weight", torch::empty({embed_dim, vdim}));
    in_proj_weight = register_parameter("in_proj_weight", {}, /*requires_grad=*/false);
  } else {
    in_proj_weight = register_parameter("in_proj_weight", torch::empty({3 * embed_dim, embed_dim}));
    q_proj_weight = register_parameter("q_proj_weight", {}, /*requires_grad=*/false);
    k_proj_weight = register_parameter("k_proj_weight", {}, /*requires_grad=*/false);
    v_proj_weight = register_parameter("v_proj_weight", {}, /*requires_grad=*/false);
  }
  in_proj_bias = options.bias()
      ? register_parameter("in_proj_bias", torch::empty({3 * embed_dim}))
      : register_parameter("in_proj_bias", {}, /*requires_grad=*/false);
  // Constructing the Linear draws its default init, as in Python's __init__.
  out_proj = register_module(
      "out_proj",
      torch::nn::Linear(torch::nn::LinearOptions(embed_dim, embed_dim).bias(options.bias())));
  if (options.add_bias_kv()) {
    bias_k = register_parameter("bias_k", torch::empty({1, 1, embed_dim}));
    bias_v = register_parameter("bias_v", torch::empty({1, 1, embed_dim}));
  } else {
    bias_k = register_parameter("bias_k", {}, /*requires_grad=*/false);
    bias_v = register_parameter("bias_v", {}, /*requires_grad=*/false);
  }
  reset_parameters();
}

void MultiheadAttentionImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  if (qkv_same_embed_dim()) {
    torch::nn::init::xavier_uniform_(in_proj_weight);
  } else {
    torch::nn::init::xavier_uniform_(q_proj_weight);
    torch::nn::init::xavier_uniform_(k_proj_weight);
    torch::nn::init::xavier_uniform_(v_proj_weight);
  }
  if (in_proj_bias.defined()) {
    torch::nn::init::constant_(in_proj_bias, 0.0);
    torch::nn::init::constant_(out_proj->bias, 0.0);
  }
  if (bias_k.defined()) {
    torch::nn::init::xavier_normal_(bias_k);
  }
  if (bias_v.defined()) {
    torch::nn::init::xavier_normal_(bias_v);
  }
}

void MultiheadAttentionImpl::pretty_print(std::ostream& stream) const {
  std::string text = fmt::format(
      "mha::MultiheadAttention(embed_dim={}, num_heads={}", options.embed_dim(), options.num_heads());
  if (options.dropout() != 0.0) text += fmt::format(", dropout={}", options.dropout());
  if (!options.bias()) text += ", bias=false";
  if (options.add_bias_kv()) text += ", add_bias_kv=true";
  if (options.add_zero_attn()) text += ", add_zero_attn=true";
  if (options.kdim()) text += fmt::format(", kdim={}", *options.kdim());
  if (options.vdim()) text += fmt::format(", vdim={}", *options.vdim());
  if (options.batch_first()) text += ", batch_first=true";
  stream << text << ")";
}

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward(
    const Tensor& query,
    const Tensor& key,
    const Tensor& value,
    const Tensor& key_padding_mask,
    bool need_weights,
    const Tensor& attn_mask,
    bool average_attn_weights,
    bool is_causal) {
  const Tensor& first_weight = in_proj_weight.defined() ? in_proj_weight : q_proj_weight;
  check_inputs(options, first_weight, query, key, value, key_padding_mask, attn_mask);

  // Where Python calls its native fused op (silently not without biases), so
  // do we, with the masks as given: bool or none there.
  const std::string why_not_fast_path =
      why_not_fast_path_reason(*this, query, key, value, key_padding_mask, attn_mask);
  if (why_not_fast_path.empty() && in_proj_bias.defined()) {
    if (detail::fast_path_forward_is_enabled()) {
      return detail::fast_path_forward(
          *this, query, key_padding_mask, need_weights, attn_mask, average_attn_weights, is_causal);
    }
    return python_native_fast_path(
        *this, query, key_padding_mask, attn_mask, need_weights, average_attn_weights);
  }

  // Both masks become additive floats of the query's dtype (Python's order):
  // other dtypes are rejected here, mismatched types warn.
  const bool is_batched = query.dim() == 3;
  const Tensor kpm = F::canonical_mask(
      key_padding_mask, "key_padding_mask", dtype_or_none(attn_mask), "attn_mask",
      query.scalar_type());
  const Tensor mask = F::canonical_mask(
      attn_mask, "attn_mask", std::nullopt, "", query.scalar_type(), /*check_other=*/false);

  TORCH_CHECK(
      !(query.is_nested() || key.is_nested() || value.is_nested()),
      "MultiheadAttention does not support NestedTensor outside of its fast path. The fast path "
      "was not hit because ",
      why_not_fast_path);

  // batch_first: (N, L, E) -> (L, N, E), keeping which inputs are the same tensor.
  Tensor q = query, k = key, v = value;
  const bool transpose = options.batch_first() && is_batched;
  if (transpose) {
    q = query.transpose(1, 0);
    k = key.is_same(query) ? q : key.transpose(1, 0);
    v = value.is_same(key) ? k : value.is_same(query) ? q : value.transpose(1, 0);
  }

  auto func_options =
      F::MultiheadAttentionForwardFuncOptions(
          options.embed_dim(), options.num_heads(), in_proj_weight, in_proj_bias, bias_k, bias_v,
          options.add_zero_attn(), options.dropout(), out_proj->weight, out_proj->bias)
          .training(is_training())
          .key_padding_mask(kpm)
          .need_weights(need_weights)
          .attn_mask(mask)
          .average_attn_weights(average_attn_weights)
          .is_causal(is_causal);
  if (!qkv_same_embed_dim()) {
    func_options.use_separate_proj_weight(true)
        .q_proj_weight(q_proj_weight)
        .k_proj_weight(k_proj_weight)
        .v_proj_weight(v_proj_weight);
  }
  auto [out, weights] = F::multi_head_attention_forward(q, k, v, func_options);
  if (transpose) {
    out = out.transpose(1, 0);  // (L, N, E) -> (N, L, E)
  }
  return {out, weights};
}

void set_fastpath_enabled(bool enabled) {
  fastpath_enabled.store(enabled);
}

bool get_fastpath_enabled() {
  return fastpath_enabled.load();
}

}  // namespace mha
