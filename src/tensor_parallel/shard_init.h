#pragma once

// Private: the initial values of a rank's shard, Python's scheme
// (MultiheadAttention._reset_parameters after Linear.reset_parameters) with
// the bounds of the whole tensors.

#include <torch/nn/module.h>

#include "tensor_parallel/sharding.h"

namespace mha {
namespace detail {

/// Initialises the parameters of `module` (registered with this rank's shapes
/// and Python's names) as Python initialises the whole module's: xavier_uniform_
/// of the q, k, v rows, Linear's kaiming_uniform_(a=sqrt(5)) of
/// `out_proj.weight`, xavier_normal_ of `bias_k`/`bias_v`, zero biases; each
/// bound or std from the whole tensor's fans (`_calculate_fan_in_and_fan_out`
/// of its global shape, torch/nn/init.py).
///
/// `exact`: the values are the single-process module's from the same global
/// generator state, which ends where constructing that module leaves it: each
/// whole tensor is drawn from the global generator, in Python's order, a block
/// of rows at a time, and only this rank's part kept.
/// Otherwise only the shard is drawn, from a generator of this rank's own
/// (`at::CPUGeneratorImpl`) seeded with one 64-bit draw of the global
/// generator plus the rank: ranks started from the same seed draw the same
/// base, so shards differ from rank to rank and a run is reproducible.
void init_shard(torch::nn::Module& module, const Shard& shard, bool exact);

}  // namespace detail
}  // namespace mha
