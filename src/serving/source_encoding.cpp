// ContinuousBatch::add_sources's encoder call (serving/source_encoding.h).

#include "serving/source_encoding.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "common/shape_format.h"
#include "mha/transformer_coder.h"
#include "serving/serving_stack.h"

namespace mha {
namespace detail {

using torch::Tensor;

/// A group's padded positions may be this many times its real ones.
constexpr double kPaddedShare = 1.25;

std::vector<std::vector<size_t>> length_groups(const std::vector<Tensor>& sources) {
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size(0) > sources[b].size(0); });
  std::vector<std::vector<size_t>> groups;
  int64_t longest = 0, real = 0;  // the open group's first length and its sum
  for (const size_t i : order) {
    const int64_t length = sources[i].size(0);
    if (!groups.empty() && static_cast<double>((groups.back().size() + 1) * longest) <=
                               kPaddedShare * static_cast<double>(real + length)) {
      groups.back().push_back(i);
      real += length;
      continue;
    }
    groups.push_back({i});
    longest = real = length;
  }
  return groups;
}

namespace {

/// `sources[i]` (S_i, E) and its mask (S_i) bool, or undefined.
void check_source(const Tensor& src,
                  const Tensor& mask,
                  size_t i,
                  const MultiheadAttentionImpl& attn) {
  check_serving_rows(src, fmt::format("sources[{}]", i), attn);
  TORCH_CHECK_VALUE(src.size(0) > 0, "expected sources[", i, "] of at least one position");
  TORCH_CHECK_VALUE(!mask.defined() || (mask.scalar_type() == at::kBool &&
                                        mask.sizes() == src.sizes().slice(0, 1)),
                    fmt::format("expected src_key_padding_masks[{}] of shape torch.Size([{}]) "
                                "and dtype bool, but got {} of {}",
                                i, src.size(0), mask.defined() ? torch_size(mask.sizes()) : "none",
                                mask.defined() ? c10::toString(mask.scalar_type()) : "none"));
  TORCH_CHECK_VALUE(!mask.defined() || !mask.all().item<bool>(), "expected sources[", i,
                    "] of at least one unmasked position");
}

/// `x` (N, S, E) in the model's layout: (S, N, E) unless batch_first.
Tensor model_layout(const TransformerImpl& model, const Tensor& x) {
  return model.options.batch_first() ? x : x.transpose(0, 1);
}

/// The memories of `sources` in one encoder call, padded to the longest:
/// (S_i, E) each.
std::vector<Tensor> encode_padded(const TransformerImpl& model,
                                  const std::vector<Tensor>& sources,
                                  const std::vector<Tensor>& masks) {
  const auto n = static_cast<int64_t>(sources.size());
  int64_t longest = 0;
  for (const Tensor& src : sources) longest = std::max(longest, src.size(0));
  const Tensor& first = sources.front();
  Tensor padded = at::zeros({n, longest, first.size(1)}, first.options());    // (N, S, E)
  Tensor padding = at::ones({n, longest}, first.options().dtype(at::kBool));  // (N, S)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t length = sources[i].size(0);
    padded[i].narrow(0, 0, length).copy_(sources[i]);
    Tensor unpadded = padding[i].narrow(0, 0, length);  // (S_i): the source's own mask, or none
    if (masks.empty() || !masks[i].defined()) {
      unpadded.fill_(false);
    } else {
      unpadded.copy_(masks[i]);
    }
  }
  const Tensor memory =
      model_layout(model, model.encode(model_layout(model, padded), {}, padding));  // (N, S, E)
  std::vector<Tensor> memories;
  for (int64_t i = 0; i < n; ++i) memories.push_back(memory[i].narrow(0, 0, sources[i].size(0)));
  return memories;
}

/// The memories of `sources`, one padded encoder call per length group.
std::vector<Tensor> encode_grouped(const TransformerImpl& model,
                                   const std::vector<Tensor>& sources,
                                   const std::vector<Tensor>& masks) {
  std::vector<Tensor> memories(sources.size());
  for (const auto& group : length_groups(sources)) {
    std::vector<Tensor> group_sources, group_masks;
    for (const size_t i : group) {
      group_sources.push_back(sources[i]);
      if (!masks.empty()) group_masks.push_back(masks[i]);
    }
    const std::vector<Tensor> encoded = encode_padded(model, group_sources, group_masks);
    for (size_t j = 0; j < group.size(); ++j) memories[group[j]] = encoded[j];
  }
  return memories;
}

/// The memories of `sources` (S_i, E) in one packed call of `encoder` (no
/// padding, each GEMM over all their rows): (S_i, E) each.
std::vector<Tensor> encode_packed(TransformerEncoderImpl& encoder,
                                  const std::vector<Tensor>& sources) {
  std::vector<int64_t> offsets{0};
  for (const Tensor& src : sources) offsets.push_back(offsets.back() + src.size(0));
  const Tensor memory = encoder.forward_packed(at::cat(sources), torch::tensor(offsets));  // (T, E)
  std::vector<Tensor> memories;
  for (size_t i = 0; i < sources.size(); ++i) {
    memories.push_back(memory.narrow(0, offsets[i], offsets[i + 1] - offsets[i]));  // (S_i, E)
  }
  return memories;
}

}  // namespace

std::vector<Tensor> encode_sources(const TransformerImpl& model,
                                   const MultiheadAttentionImpl& attn,
                                   const std::vector<Tensor>& sources,
                                   const std::vector<Tensor>& masks,
                                   bool one_call_each) {
  TORCH_CHECK_VALUE(masks.empty() || masks.size() == sources.size(),
                    "expected no src_key_padding_masks or one per source (", sources.size(),
                    "), but got ", masks.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    check_source(sources[i], masks.empty() ? Tensor() : masks[i], i, attn);
  }
  if (sources.size() > 1 && !one_call_each) {
    // packed when no source has a mask and the encoder is mha's; else padded groups
    const auto encoder = std::dynamic_pointer_cast<TransformerEncoderImpl>(model.encoder.ptr());
    const bool masked =
        std::any_of(masks.begin(), masks.end(), [](const Tensor& mask) { return mask.defined(); });
    if (encoder != nullptr && !masked) return encode_packed(*encoder, sources);
    return encode_grouped(model, sources, masks);
  }
  std::vector<Tensor> memories;
  for (size_t i = 0; i < sources.size(); ++i) {  // a batch of one each: (1, S_i, E) or (S_i, 1, E)
    const Tensor& mask = masks.empty() ? Tensor() : masks[i];
    const Tensor src = model_layout(model, sources[i].unsqueeze(0));
    const Tensor memory = model.encode(src, {}, mask.defined() ? mask.unsqueeze(0) : Tensor());
    memories.push_back(model_layout(model, memory).squeeze(0));  // (S_i, E)
  }
  return memories;
}

}  // namespace detail
}  // namespace mha
