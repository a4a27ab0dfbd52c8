#include "attention/call_plan.h"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>

#include "attention/prefill/prefill_attention.h"
#include "common/decode_dtypes.h"
#include "linear/int8_linear.h"
#include "linear/packed_weight.h"
#include "linear/weight_form.h"
#include "mha/kernel_switches.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

/// Whether `owner`'s parameter `param` (its value `value`) is an int8 placeholder.
bool is_int8(const torch::nn::Module& owner, const std::string& param, const Tensor& value) {
  return is_placeholder(value) &&
         std::dynamic_pointer_cast<const Int8WeightImpl>(weight_form(owner, param)) != nullptr;
}

/// The device and grad conditions that end Python's `why_not_fast_path`.
std::string why_not_devices_or_grad(const AttentionWeights& m, const Tensor& query) {
  bool needs_grad = false;
  for (const Tensor* t :
       {&query, &m.in_proj_weight, &m.in_proj_bias, &m.out_proj->weight, &m.out_proj->bias}) {
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

/// The module's conditions of Python's `why_not_fast_path`, after the inputs';
/// `batch_first` among them only when `check_layout`.
std::string why_not_module(const AttentionWeights& m, const Tensor& query, bool check_layout) {
  const auto& o = m.options;
  const int64_t embed_dim = o.embed_dim();
  if (m.in_proj_bias.defined() && query.scalar_type() != m.in_proj_bias.scalar_type()) {
    return "dtypes of query and self.in_proj_bias don't match";
  }
  if (!m.in_proj_weight.defined()) return "in_proj_weight was None";
  if (is_int8(m.owner, "in_proj_weight", m.in_proj_weight) ||
      is_int8(*m.out_proj, "weight", m.out_proj->weight)) {
    return "the projections are int8 (mha::quantize_dynamic)";
  }
  if (query.scalar_type() != m.in_proj_weight.scalar_type()) {
    return "dtypes of query and self.in_proj_weight don't match";
  }
  if (m.is_training()) return "training is enabled";
  if (o.num_heads() % 2 != 0) return "self.num_heads is not even";
  if (check_layout && !o.batch_first()) return "batch_first was not True";
  if (m.bias_k.defined()) return "self.bias_k was not None";
  if (m.bias_v.defined()) return "self.bias_v was not None";
  if (o.add_zero_attn()) return "add_zero_attn was enabled";
  if (o.kdim().value_or(embed_dim) != embed_dim || o.vdim().value_or(embed_dim) != embed_dim) {
    return "_qkv_same_embed_dim was not True";
  }
  return "";
}

/// Python's `why_not_fast_path`, without its `batch_first` condition unless `check_layout`.
std::string why_not_fast_path_checks(const AttentionWeights& m,
                                     const AttentionCall& call,
                                     bool check_layout) {
  auto not_bool = [](const Tensor& mask) {
    return mask.defined() && mask.scalar_type() != at::kBool;
  };
  if (not_bool(call.attn_mask) || not_bool(call.key_padding_mask)) {
    return "floating-point masks are not supported for fast path.";
  }
  if (!get_fastpath_enabled()) {
    return "torch.backends.mha.get_fastpath_enabled() was not True";
  }
  if (call.query.dim() != 3) {
    return fmt::format("input not batched; expected query.dim() of 3 but got {}", call.query.dim());
  }
  if (!call.is_self_attention()) {
    return "non-self attention was used (query, key, and value are not the same Tensor)";
  }
  std::string reason = why_not_module(m, call.query, check_layout);
  if (!reason.empty()) return reason;
  if (call.query.is_nested() && call.masked()) {
    return "supplying both src_key_padding_mask and src_mask at the same time is not supported "
           "with NestedTensor input";
  }
  if (at::autocast::is_autocast_enabled(at::kCUDA)) return "autocast is enabled";
  return why_not_devices_or_grad(m, call.query);
}

}  // namespace

std::string why_not_fast_path(const AttentionWeights& m, const AttentionCall& call) {
  return why_not_fast_path_checks(m, call, /*check_layout=*/true);
}

bool takes_sequence_first_kernel(const AttentionWeights& m, const AttentionCall& call) {
  // The hint without its mask, or an empty query: Python's steps and their errors.
  const bool causal_without_mask = call.is_causal && !call.attn_mask.defined();
  const bool empty = call.query.is_nested() || call.query.numel() == 0;
  return !m.options.batch_first() && !call.need_weights && !python_kernels_enabled() &&
         m.in_proj_bias.defined() && !causal_without_mask && !empty &&
         why_not_fast_path_checks(m, call, /*check_layout=*/false).empty();
}

AttentionKernel choose_fast_path_kernel(
    int64_t batch, int64_t seq_len, bool need_weights, bool masked, bool prepacked) {
  if (python_kernels_enabled()) return AttentionKernel::kPython;
  if (prepacked) return need_weights ? AttentionKernel::kByHead : AttentionKernel::kFused;
  const int64_t min_length = !masked && batch == 1 ? kUnmaskedSingleMinLength
                             : need_weights        ? kByHeadMinLength
                                                   : kFusedMinLength;
  if (seq_len < min_length) return AttentionKernel::kNative;
  return need_weights ? AttentionKernel::kByHead : AttentionKernel::kFused;
}

bool has_prepacked_projections(const AttentionWeights& module) {
  return is_placeholder(module.in_proj_weight) &&
         std::dynamic_pointer_cast<const PackedWeightImpl>(weight_form(module, "in_proj_weight")) !=
             nullptr;
}

bool takes_prefill_attention(const AttentionWeights& module,
                             const Tensor& q,
                             const Tensor& k,
                             const Tensor& v) {
  return has_prepacked_projections(module) && prefill_attention_takes(q, k, v);
}

bool causal_hint_drops_attn_mask(const AttentionCall& call) {
  return call.is_causal && !call.need_weights && !call.key_padding_mask.defined();
}

CallPlan plan_call(const AttentionWeights& module, const AttentionCall& call) {
  CallPlan plan;
  plan.why_not_fast_path = why_not_fast_path(module, call);
  if (plan.why_not_fast_path.empty() && module.in_proj_bias.defined()) {
    // A nested query (a layer's, from a nested src) has no sizes: Python's op.
    plan.kernel = call.query.is_nested()
                      ? AttentionKernel::kPython
                      : choose_fast_path_kernel(
                            call.query.size(0), call.query.size(1),  // (N, L, E)
                            call.need_weights, call.masked(), has_prepacked_projections(module));
    return plan;
  }
  plan.attn_mask_dropped = causal_hint_drops_attn_mask(call);
  if (takes_sequence_first_kernel(module, call)) {
    plan.kernel = AttentionKernel::kSequenceFirst;
  }
  return plan;
}

CallPlan plan_stored_call(const StoredCall& call) {
  const bool decode_reads = decode_kernel_reads(call.dtype, call.device);
  CallPlan plan;
  if (call.layout == KeyValueLayout::kDense) {
    const bool decode_takes = call.query_len == 1 && call.key_len > 0 && decode_reads &&
                              call.store_dtype == call.dtype && !call.mask.defined();
    plan.kernel = call.need_weights ? AttentionKernel::kOverKeysWithWeights
                  : decode_takes    ? AttentionKernel::kDecode
                                    : AttentionKernel::kOverKeys;
    return plan;
  }
  const std::vector<int64_t>& offsets = *call.query_offsets;
  plan.kernel = AttentionKernel::kOverKeys;
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    const bool one_query = offsets[i + 1] - offsets[i] == 1;
    plan.sequence_kernels.push_back(one_query && decode_reads ? AttentionKernel::kDecode
                                                              : AttentionKernel::kOverKeys);
  }
  return plan;
}

}  // namespace detail
}  // namespace mha
