#pragma once

// Private: ContinuousBatch::add_sources's encoder call, the sources of one
// admission padded into one batch.

#include <mha/transformer.h>
#include <torch/types.h>

#include <vector>

namespace mha {
namespace detail {

/// The memories of `sources` (each (S_i, E); `masks` empty or one (S_i)
/// bool, true = padding, or undefined tensor per source; all checked first,
/// the sources against `attn`'s width, dtype and device), each (S_i, E),
/// encoded by `model`: in one call, padded to the longest with a key padding
/// mask, or with `one_call_each` one call per source (a batch of one).
std::vector<torch::Tensor> encode_sources(const TransformerImpl& model,
                                          const MultiheadAttentionImpl& attn,
                                          const std::vector<torch::Tensor>& sources,
                                          const std::vector<torch::Tensor>& masks,
                                          bool one_call_each);

}  // namespace detail
}  // namespace mha
