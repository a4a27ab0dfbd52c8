#pragma once

// Private: ContinuousBatch::add_sources's encoder calls: the sources of one
// admission packed as rows into one call of mha's encoder, or padded into
// batches of similar lengths.

#include <mha/transformer.h>
#include <torch/types.h>

#include <cstddef>
#include <vector>

namespace mha {
namespace detail {

/// The sources' indices in groups of one padded encoder call each: longest
/// first, a group taking the next source while its padded positions stay
/// within 1.25x of its real ones (48 sources of 16-128 positions: 3-4 calls
/// and ~1.2x the real positions, where one call computes ~1.9x).
std::vector<std::vector<size_t>> length_groups(const std::vector<torch::Tensor>& sources);

/// The memories of `sources` (each (S_i, E); `masks` empty or one (S_i)
/// bool, true = padding, or undefined tensor per source; all checked first,
/// the sources against `attn`'s width, dtype and device), each (S_i, E),
/// encoded by `model`: without masks, by an mha::TransformerEncoder, in one
/// `forward_packed` call (every GEMM over all the sources' rows, no
/// padding); else grouped by length (`length_groups`), one call per group
/// padded to its longest with a key padding mask; with `one_call_each` one
/// call per source (a batch of one).
std::vector<torch::Tensor> encode_sources(const TransformerImpl& model,
                                          const MultiheadAttentionImpl& attn,
                                          const std::vector<torch::Tensor>& sources,
                                          const std::vector<torch::Tensor>& masks,
                                          bool one_call_each);

}  // namespace detail
}  // namespace mha
