#pragma once

// Continuous batching over a Transformer decoder, or a causal (decoder-only)
// TransformerEncoder stack: requests join and leave at any step, each step runs the new positions
// of any subset of them as one variable-length batch through paged caches. See docs/decoding.md.

#include <mha/paged_kv_cache.h>
#include <mha/paged_stack_cache.h>
#include <mha/transformer.h>
#include <torch/arg.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace mha {

class ContinuousBatch;

namespace detail {
class ServingStack;
/// A whole model's paged step on a batch's caches: `self_cache` (every
/// layer's self-attention), `memory_cache` (a decoder's memories, or null),
/// `cu_seqlens` (P + 1) the new rows' offsets; the model's output.
using BatchStep = std::function<torch::Tensor(
    PagedStackCache& self_cache, PagedStackCache* memory_cache, const torch::Tensor& cu_seqlens)>;
/// Private access for `GenerationServer`, which steps its model through the
/// model's own paged call: `step` on `batch`'s caches for the new rows of
/// `ids` (`lengths[i]` each), checked and run as `ContinuousBatch::step`
/// (under its lock, in its batch invariance).
torch::Tensor step_model(ContinuousBatch& batch,
                         const std::vector<int64_t>& ids,
                         const std::vector<int64_t>& lengths,
                         const BatchStep& step);
}  // namespace detail

/// The pools of a `ContinuousBatch`: per layer, one for the self-attention's
/// keys and values and one for the requests' projected memories; all layers'
/// self-attention pools share one block table, and all memory pools another.
struct ContinuousBatchOptions {
  /// Positions per block.
  TORCH_ARG(int64_t, block_size) = 16;
  /// Blocks of each layer's self-attention pool (the decoded positions).
  TORCH_ARG(int64_t, num_blocks) = 1024;
  /// Blocks of each layer's cross-attention pool (the memories).
  TORCH_ARG(int64_t, num_memory_blocks) = 1024;
  /// Batch invariance (float32 weights): every GEMM of a step runs on blocks
  /// of exactly `invariant_rows` rows (the last padded with zeros), so its
  /// shape, kernel and thread split never depend on the batch; attention is
  /// per (sequence, head) in every mode (the paged decode kernel) or per
  /// sequence (SDPA over a prompt chunk). A request's outputs are then bitwise
  /// those of the request decoded alone in this mode, whichever requests share
  /// its steps. Costs the padded rows' work, and a GEMM call per block.
  TORCH_ARG(bool, batch_invariant) = false;
  /// The GEMMs' row block with `batch_invariant` (> 0): larger blocks stream
  /// the weights fewer times per step when many requests are active, smaller
  /// ones pad fewer rows when few are (docs/decoding.md measures the choice).
  TORCH_ARG(int64_t, invariant_rows) = 8;
};

/// Serves many requests of one `mha::TransformerDecoder` (or an
/// `mha::Transformer`'s, which `add_sources` also encodes for), or of a causal
/// `mha::TransformerEncoder` stack (a decoder-only model), at once: `add`
/// admits a request (with its encoder memory for a decoder, projected into
/// every layer's cross-attention pool at once; nothing for a decoder-only
/// stack), `step` runs the new positions of any subset of the requests as one
/// batch (the layers' `forward_paged`, then the final norm), `remove` frees a
/// request's blocks. Each request's outputs equal the stack's `forward_cached`
/// of that request alone within float32 rounding, whichever requests share
/// its steps.
/// The caller keeps the embedding, the output projection and the sampling.
///
/// Errors (`c10::Error`, no request changed): a memory the pools cannot hold
/// (admission fails cleanly), a step needing more blocks than are free, an
/// unknown id, a wrong shape or dtype. The methods lock one mutex: calls from
/// several threads run one at a time (`add_sources` encodes before it
/// locks). With int8 weights (`mha::quantize_dynamic`) a request's results
/// depend on its neighbours (the activations' scale is per call), and
/// `batch_invariant` is refused.
///
/// Example:
/// ```
/// mha::Transformer model(mha::TransformerOptions(32, 4, 2, 2).dim_feedforward(64));
/// model->eval();
/// mha::ContinuousBatch batch(model, mha::ContinuousBatchOptions().num_blocks(64));
/// const int64_t a = batch.add(model->encode(torch::randn({7, 32})));  // memory (S, E)
/// const int64_t b = batch.add(torch::randn({3, 32}));  // a memory from anywhere
/// auto more = batch.add_sources({torch::randn({5, 32}), torch::randn({4, 32})});  // 1 encode
/// auto out = batch.step({{a, torch::randn({4, 32})}, {b, torch::randn({1, 32})}});
/// out = batch.step({{a, torch::randn({1, 32})}});        // (1, 32) for a only
/// batch.remove(b);
/// ```
class ContinuousBatch {
 public:
  /// Pools for `decoder` (eval mode; its layers' dtype and device).
  ContinuousBatch(TransformerDecoder decoder, const ContinuousBatchOptions& options = {});
  /// Pools for `model`'s decoder, which must be a `mha::TransformerDecoder`
  /// (the built one, or one given as `custom_decoder`); the caller encodes
  /// with `model->encode` for `add`, or `add_sources` encodes.
  ContinuousBatch(const Transformer& model, const ContinuousBatchOptions& options = {});
  /// Pools for a causal `TransformerEncoder` stack (`num_memory_blocks` unused).
  ContinuousBatch(TransformerEncoder causal_stack, const ContinuousBatchOptions& options = {});
  /// Frees the pools.
  ~ContinuousBatch();

  /// Admits a request: for a decoder, `memory` (S, E), the encoder's output
  /// for it, and `memory_key_padding_mask` (S) bool, true = padding (those
  /// positions are left out); for a decoder-only stack, nothing. Returns its id.
  int64_t add(const torch::Tensor& memory = {}, const torch::Tensor& memory_key_padding_mask = {});
  /// Admits one request per source, for a batch made from a `Transformer`:
  /// `sources[i]` (S_i, E), already embedded, and `src_key_padding_masks[i]`
  /// (S_i) bool, true = padding, or undefined (the vector may be empty: no
  /// masks). The sources are encoded together, grouped by length: one
  /// `encode` call per group of similar lengths, padded to the group's
  /// longest (the padding masked; padded positions within 1.25x of the
  /// group's real ones, so 48 sources of 16-128 take 3-4 calls), each memory's positions then
  /// admitted as by `add` (masked ones left out); with `batch_invariant`, each
  /// source is encoded by its own call, so a memory never depends on the
  /// other sources. All or none: every source and the free memory blocks for
  /// all are checked before any request is admitted. Returns their ids, in
  /// the order of `sources`.
  std::vector<int64_t> add_sources(const std::vector<torch::Tensor>& sources,
                                   const std::vector<torch::Tensor>& src_key_padding_masks = {});
  /// For each id of `inputs`, its (L_i, E) new positions (a prompt chunk or
  /// one token): their (L_i, E) outputs, as one variable-length batch.
  std::map<int64_t, torch::Tensor> step(const std::map<int64_t, torch::Tensor>& inputs);
  /// The packed form of `step`, for a server that embeds and projects all of
  /// a step's rows in one call each: `rows` (T, E) holds the new positions of
  /// `ids` in that order, `lengths[i]` rows for `ids[i]` (their sum T);
  /// returns their outputs, (T, E) in the same order. The same checks, the
  /// same results as the map form.
  torch::Tensor step(const torch::Tensor& rows,
                     const std::vector<int64_t>& ids,
                     const std::vector<int64_t>& lengths);
  /// Forgets request `id` and frees its blocks.
  void remove(int64_t id);
  /// A new request that continues request `id` from where it is: it shares
  /// `id`'s blocks (its decoded positions and, for a decoder, its memory),
  /// copied on write when either writes into a shared block (beam search,
  /// several samples of one prompt). Takes no block; returns its id.
  int64_t fork(int64_t id);

  /// The active requests' ids, ascending.
  std::vector<int64_t> ids() const;
  /// Decoded positions of request `id`.
  int64_t length(int64_t id) const;
  /// Free blocks of the self-attention block table (every layer's pool).
  int64_t num_free_blocks() const;
  /// Bytes of all pools: every layer's self-attention pool, and a decoder's
  /// memory pools.
  int64_t memory_bytes() const;
  /// Bytes of the blocks the requests hold, in every pool.
  int64_t used_bytes() const;

 private:
  /// The decoder or the causal stack, with its paged caches (each kind of
  /// self-attention and memory caches over one block table for all layers).
  std::unique_ptr<detail::ServingStack> stack_;
  /// Throws unless `ids` are known and `lengths` (one each) non-negative;
  /// the sum of `lengths`. The mutex held.
  int64_t checked_rows(const std::vector<int64_t>& ids, const std::vector<int64_t>& lengths) const;
  /// `step` of new rows of `lengths` (their ids checked), in the batch's
  /// invariance; the mutex held.
  torch::Tensor run_step(const std::vector<int64_t>& lengths, const detail::BatchStep& step);
  friend torch::Tensor detail::step_model(ContinuousBatch& batch,
                                          const std::vector<int64_t>& ids,
                                          const std::vector<int64_t>& lengths,
                                          const detail::BatchStep& step);

  /// The model whose encoder `add_sources` calls; empty unless made from one.
  Transformer model_{nullptr};
  int64_t invariant_rows_;  // the GEMMs' row block with batch_invariant; 0: any rows
  mutable std::mutex mutex_;
};

}  // namespace mha
