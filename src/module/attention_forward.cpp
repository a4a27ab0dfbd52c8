#include "mha/attention_forward.h"

#include "attention/attention_call.h"

namespace mha {

std::tuple<torch::Tensor, torch::Tensor> AttentionForward::forward(
    const torch::Tensor& query,
    const torch::Tensor& key,
    const torch::Tensor& value,
    const torch::Tensor& key_padding_mask,
    bool need_weights,
    const torch::Tensor& attn_mask,
    bool average_attn_weights,
    bool is_causal) {
  return forward_call({query, key, value, key_padding_mask, attn_mask, need_weights,
                       average_attn_weights, is_causal});
}

}  // namespace mha
