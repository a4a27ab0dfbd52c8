#include "hugging_face/models/model_inputs.h"

#include <c10/util/Exception.h>
#include <mha/hf_encoder_models.h>
#include <mha/prepack.h>
#include <mha/quantization.h>
#include <torch/types.h>

#include <limits>

#include "linear/weight_form.h"

namespace mha {
namespace detail {

void check_token_ids(const torch::Tensor& ids,
                     int64_t vocab_size,
                     const std::string& name,
                     int64_t dims) {
  TORCH_CHECK_VALUE(ids.defined(), name, ": expected token ids, but got an undefined tensor");
  TORCH_CHECK_VALUE(!c10::isFloatingType(ids.scalar_type()) && ids.scalar_type() != torch::kBool,
                    name, ": expected integer token ids, but got ", ids.scalar_type());
  TORCH_CHECK_VALUE(ids.dim() == dims, name, ": expected ", dims, "-D token ids, but got shape ",
                    ids.sizes());
  if (ids.numel() == 0) {
    return;
  }
  const auto flat = ids.reshape({-1});
  const auto outside = (flat < 0).logical_or(flat >= vocab_size).nonzero();  // (K, 1)
  if (outside.size(0) > 0) {
    const int64_t at = outside[0][0].item<int64_t>();
    TORCH_CHECK_INDEX(false, name, ": token id ", flat[at].item<int64_t>(), " at flat index ", at,
                      " is outside the vocabulary: expected ids in [0, ", vocab_size,
                      ") (vocab_size ", vocab_size, ")");
  }
}

torch::Tensor paged_positions(const PagedSequences& cache,
                              const std::vector<int64_t>& seq_ids,
                              const torch::Tensor& cu_seqlens) {
  const torch::Tensor offsets = cu_seqlens.to(torch::kCPU, torch::kLong).contiguous();  // (P + 1)
  TORCH_CHECK_VALUE(
      offsets.dim() == 1 && offsets.size(0) == static_cast<int64_t>(seq_ids.size()) + 1,
      "cu_seqlens: expected ", seq_ids.size() + 1, " offsets, but got shape ", offsets.sizes());
  const int64_t* at = offsets.data_ptr<int64_t>();
  std::vector<torch::Tensor> parts;
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    const int64_t past = cache.length(seq_ids[i]);
    parts.push_back(torch::arange(past, past + at[i + 1] - at[i], torch::kLong));  // (L_i)
  }
  return torch::cat(parts);  // (T)
}

torch::Tensor last_row_indices(const torch::Tensor& cu_seqlens) {
  TORCH_CHECK_VALUE(cu_seqlens.dim() == 1 && cu_seqlens.size(0) > 0,
                    "cu_seqlens: expected offsets of shape (num_sequences + 1), but got shape ",
                    cu_seqlens.sizes());
  const torch::Tensor offsets = cu_seqlens.to(torch::kCPU, torch::kLong);  // (P + 1)
  const int64_t count = offsets.size(0) - 1;
  const torch::Tensor ends = offsets.narrow(0, 1, count);  // (P)
  TORCH_CHECK_VALUE(count == 0 || (ends - offsets.narrow(0, 0, count)).min().item<int64_t>() > 0,
                    "last_rows_only: expected every sequence to have new rows, but cu_seqlens "
                    "gives one none: ",
                    offsets);
  return ends - 1;  // (P)
}

void check_positions(const torch::Tensor& positions, int64_t rows, int64_t offset) {
  if (positions.numel() == 0) {
    return;
  }
  const int64_t high = positions.max().item<int64_t>();
  const int64_t low = positions.min().item<int64_t>();
  TORCH_CHECK_INDEX(low + offset >= 0 && high + offset < rows, "position ", high,
                    " is beyond the position table: expected positions in [", -offset, ", ",
                    rows - offset, ") (max_position_embeddings ", rows - offset,
                    "), but got positions ", low, " to ", high);
}

void check_attention_mask(const torch::Tensor& mask, int64_t batch, int64_t length) {
  if (!mask.defined()) {
    return;
  }
  TORCH_CHECK_VALUE(mask.dim() == 2 && mask.size(0) == batch && mask.size(1) == length,
                    "attention_mask: expected shape (", batch, ", ", length, "), but got ",
                    mask.sizes());
}

torch::Tensor key_padding_mask(const torch::Tensor& attention_mask) {
  return attention_mask.defined() ? attention_mask.eq(0) : torch::Tensor();  // (N, S)
}

bool has_padding(const torch::Tensor& attention_mask) {
  return attention_mask.defined() && !attention_mask.ne(0).all().item<bool>();
}

torch::Tensor padded_causal_mask(const torch::Tensor& attention_mask,
                                 int64_t num_heads,
                                 torch::Dtype dtype) {
  const int64_t length = attention_mask.size(1);
  const auto opts = torch::TensorOptions().dtype(torch::kBool).device(attention_mask.device());
  const auto causal = torch::ones({length, length}, opts).tril();                 // (L, L)
  const auto key_ok = attention_mask.ne(0).unsqueeze(1);                          // (N, 1, L)
  const auto self = torch::eye(length, opts).unsqueeze(0);                        // (1, L, L)
  const auto allowed = causal.unsqueeze(0).logical_and(key_ok).logical_or(self);  // (N, L, L)
  const auto mask =
      torch::zeros(allowed.sizes(), torch::TensorOptions().dtype(dtype))
          .masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
  return mask.repeat_interleave(num_heads, /*dim=*/0);  // (N * H, L, L)
}

EncoderModelOutput encoder_model_output(const torch::Tensor& hidden,
                                        const torch::nn::Linear& pooler) {
  EncoderModelOutput out;
  out.last_hidden_state = hidden;  // (N, L, E)
  if (!pooler.is_empty()) {
    out.pooler_output = torch::tanh(mha::linear(*pooler, hidden.select(1, 0)));  // (N, out)
  }
  return out;
}

void print_model(std::ostream& stream,
                 const char* name,
                 const std::string& model_type,
                 int64_t num_layers) {
  stream << name << "(model_type=" << model_type << ", num_layers=" << num_layers << ")";
}

torch::nn::Linear register_lm_head(torch::nn::Module& model, int64_t in, int64_t vocab_size) {
  return model.register_module(
      "lm_head", torch::nn::Linear(torch::nn::LinearOptions(in, vocab_size).bias(false)));
}

void tie_lm_head(bool tie_word_embeddings,
                 torch::nn::LinearImpl& head,
                 const torch::Tensor& embeddings) {
  torch::Tensor& alias = head.weight;
  if (!tie_word_embeddings || !alias.defined() || !embeddings.defined() || is_placeholder(alias) ||
      is_placeholder(embeddings)) {
    return;
  }
  torch::NoGradGuard no_grad;
  alias.set_data(embeddings);
}

void to_unpacking(torch::nn::Module& module,
                  std::optional<torch::Device> device,
                  std::optional<torch::Dtype> dtype,
                  bool non_blocking) {
  const bool leaves_float_cpu =
      (device && !device->is_cpu()) || (dtype && *dtype != torch::kFloat32);
  if (leaves_float_cpu && is_prepacked(module)) unpack(module);
  if (device && dtype) {
    module.torch::nn::Module::to(*device, *dtype, non_blocking);
  } else if (dtype) {
    module.torch::nn::Module::to(*dtype, non_blocking);
  } else {
    module.torch::nn::Module::to(*device, non_blocking);
  }
}

}  // namespace detail
}  // namespace mha
