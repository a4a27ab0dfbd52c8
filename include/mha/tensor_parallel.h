#pragma once

// Tensor-parallel multi-head attention over a torch.distributed (c10d)
// communicator: each rank holds num_heads / world_size heads. Built when mha is
// configured with MHA_DISTRIBUTED (LibTorch with c10d); see docs/tensor_parallel.md.

#include <torch/nn/cloneable.h>
#include <torch/nn/modules/common.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <tuple>

#include "mha/multihead_attention.h"
#include "mha/state_dict.h"

namespace mha {

/// Options of `process_group_from_env`.
struct ProcessGroupFromEnvOptions {
  /// How long a collective (and the rendezvous) may wait for the other ranks
  /// before it fails with an error instead of hanging (c10d's default: 30 min).
  TORCH_ARG(std::chrono::milliseconds, timeout) = std::chrono::minutes(30);
  /// Before the group is built, every rank writes its WORLD_SIZE to the store
  /// (key `mha_tp/world_size/<rank>`) and compares it with every other rank's,
  /// so a rank started with another world size fails with an error naming both
  /// on every rank. A Python rank joining the group must then write its key too.
  TORCH_ARG(bool, check_world_size) = true;
};

/// A Gloo process group (`c10d::ProcessGroupGloo`, a `c10d::Backend`) built as
/// Python's `torch.distributed.init_process_group("gloo")` builds its default
/// group from torchrun's environment: MASTER_ADDR, MASTER_PORT (rank 0 hosts
/// the `c10d::TCPStore` there), RANK, WORLD_SIZE, and the same store prefix, so
/// Python ranks can join. Throws `c10::Error` naming a missing or malformed
/// variable, or the ranks whose world sizes differ.
///
/// Example (under `torchrun --nproc-per-node 2` or `scripts/tp_run.sh 2`):
/// ```
/// auto group = mha::process_group_from_env(
///     mha::ProcessGroupFromEnvOptions().timeout(std::chrono::seconds(60)));
/// ```
c10::intrusive_ptr<c10d::Backend> process_group_from_env(
    const ProcessGroupFromEnvOptions& options = {});

/// Options of `TensorParallelMultiheadAttention` beyond the whole module's.
struct TensorParallelOptions {
  /// Initialise the shard with exactly the values (and leave the global CPU
  /// generator in the state) that constructing the single-process
  /// `MultiheadAttention` from the same generator state gives: every whole
  /// tensor is drawn from the global generator, a block of rows at a time,
  /// and only this rank's part is kept, so each rank draws the whole layer's
  /// numbers (time grows with the whole layer, memory stays the shard's plus
  /// one block). Default (false): each rank draws only its shard, from a
  /// generator of its own (see the constructor).
  TORCH_ARG(bool, exact_init) = false;
};

/// Megatron-LM's tensor-parallel `MultiheadAttention`: rank r of a group of p
/// holds heads [r * H / p, (r + 1) * H / p): their rows of the q, k and v
/// projections (and of `bias_k`/`bias_v`), the matching E / p input columns of
/// `out_proj.weight`, and the whole `out_proj.bias`. A forward computes the
/// local heads, all-reduces (sums) the (L, N, E) partial outputs, then adds
/// `out_proj.bias`, so every rank returns the whole output. In training the
/// inputs go through Megatron's "f" (identity forward, all-reduce backward),
/// so input gradients are whole on every rank and each parameter's gradient
/// is its slice of the single-process one. `num_heads` must be divisible by
/// the world size. Every rank must make the same calls in the same order.
///
/// Parameters have Python's names with the local shapes: `in_proj_weight`
/// (3E/p, E) holding [q; k; v] rows (or `q_proj_weight` (E/p, E),
/// `k_proj_weight` (E/p, kdim), `v_proj_weight` (E/p, vdim)), `in_proj_bias`
/// (3E/p), `out_proj.weight` (E, E/p), `out_proj.bias` (E), `bias_k`/`bias_v`
/// (1, 1, E/p).
///
/// Example:
/// ```
/// auto group = mha::process_group_from_env();
/// mha::TensorParallelMultiheadAttention attn(mha::MultiheadAttentionOptions(512, 8), group);
/// attn->load("attn.pt");  // the whole checkpoint; this rank reads its shard
/// auto x = torch::randn({10, 2, 512});
/// auto [out, weights] = attn(x, x, x);  // whole (10, 2, 512) and (2, 10, 10) on every rank
/// ```
class TensorParallelMultiheadAttentionImpl
    : public torch::nn::Cloneable<TensorParallelMultiheadAttentionImpl>,
      public AttentionForward,
      public AttentionParameters {
 public:
  /// Validates `options` as `MultiheadAttention` does, plus `num_heads`
  /// divisible by the group's size, and allocates and initialises only this
  /// rank's shard, with Python's scheme: xavier_uniform_ of the q, k, v rows,
  /// Linear's kaiming_uniform_(a=sqrt(5)) of `out_proj.weight`'s columns,
  /// xavier_normal_ of `bias_k`/`bias_v`, zero biases, each bound from the
  /// whole tensor's fans (as DTensor's `distribute_module` initialises local
  /// shards). The shard is drawn from a CPU generator of this rank's own,
  /// seeded with one 64-bit draw of the global generator plus the rank
  /// (Megatron-LM seeds its tensor-parallel generator with seed + 2718 +
  /// rank): shards differ between ranks, and ranks seeded alike reproduce a
  /// run. Draws one number from the global generator.
  /// `parallel_options.exact_init(true)`: the single-process module's values.
  TensorParallelMultiheadAttentionImpl(const MultiheadAttentionOptions& options,
                                       c10::intrusive_ptr<c10d::Backend> group,
                                       const TensorParallelOptions& parallel_options = {});

  // forward(query, key, value, key_padding_mask, need_weights, attn_mask,
  // average_attn_weights, is_causal): AttentionForward's, run by forward_call.

  /// Registers this rank's shard (Python's names, local shapes) and
  /// initialises it (see the constructor).
  void reset() override;

  /// Copies this rank's slices of `full`'s parameters (same options, whole
  /// shapes) into the shard. Local; the next forward validates collectively.
  void load_shard_from(const MultiheadAttentionImpl& full);

  /// Collective: every rank's shards gathered into a whole `MultiheadAttention`
  /// (on every rank) equal to the single-process module.
  MultiheadAttention gather_full() const;

  /// Every rank reads its shard from the same whole checkpoint (any format
  /// and options of `mha::load_state_dict`: prefix, key map, strict; the keys
  /// and whole shapes are checked as `load_state_dict` checks them).
  /// safetensors files and torch.save archives stream: only the bytes of
  /// the rank's rows and columns are read, into tensors of the shard's size.
  /// A TorchScript archive is read whole. Local. Throws as `load_state_dict`;
  /// the shard is then unchanged.
  LoadResult load(const std::string& path, const LoadOptions& options = {});

  /// Collective: gathers the whole tensors one at a time (an all-gather
  /// each) and, on rank 0, writes them (`mha::save_state_dict`: `.pt` that
  /// Python's `nn.MultiheadAttention` loads, or `.safetensors`). Rank 0 holds
  /// the whole state dict while it writes; the other ranks one tensor at a time.
  void save(const std::string& path) const;

  // Module's own serialization (OutputArchive/InputArchive) stays visible.
  using torch::nn::Module::load;
  using torch::nn::Module::save;

  /// Prints e.g. `mha::TensorParallelMultiheadAttention(embed_dim=8,
  /// num_heads=4, rank=0, world_size=2)`.
  void pretty_print(std::ostream& stream) const override;

  /// The options of the whole (single-process) module.
  MultiheadAttentionOptions options;
  /// The communicator: one `c10d::Backend` (Gloo on CPU, NCCL on CUDA).
  c10::intrusive_ptr<c10d::Backend> group;
  /// How the shard is initialised.
  TensorParallelOptions parallel_options;

 protected:
  /// `forward` (`AttentionForward`'s): `MultiheadAttention`'s semantics (masks,
  /// `batch_first`, unbatched input, `is_causal`, dropout); the whole output
  /// on every rank. With `need_weights`, the heads' weights are gathered from
  /// all ranks, then averaged when `average_attn_weights`. The first call
  /// checks collectively that every rank has the same world size, options and
  /// shard shapes (else every rank throws). Not the fused fast path: numbers
  /// equal the single-process module's within float rounding.
  std::tuple<torch::Tensor, torch::Tensor> forward_call(const detail::AttentionCall& call) override;

  MHA_ATTENTION_FORWARD_DEFAULT_ARGS

 private:
  /// The collective check of the first forward, done once per shard.
  void validate_across_ranks();
  bool validated_ = false;
};

/// A `ModuleHolder` for `TensorParallelMultiheadAttentionImpl`.
TORCH_MODULE(TensorParallelMultiheadAttention);

}  // namespace mha
