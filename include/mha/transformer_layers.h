#pragma once

#include <mha/convertible_module.h>
#include <mha/kv_cache.h>
#include <mha/layer_norm.h>
#include <mha/multihead_attention.h>
#include <mha/paged_kv_cache.h>
#include <mha/transformer_cache.h>
#include <torch/arg.h>
#include <torch/enum.h>
#include <torch/nn/modules/common.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <ostream>
#include <utility>
#include <variant>
#include <vector>

namespace mha {

/// The feed-forward activation, as LibTorch's transformer options take it.
/// Only the two tags can take Python's fast path, as only `F.relu`/`F.gelu`
/// (or "relu"/"gelu") do in Python; any function, even one computing relu, is
/// Python's "callable" and takes the slow path.
using TransformerActivation = std::variant<torch::enumtype::kReLU,
                                           torch::enumtype::kGELU,
                                           std::function<torch::Tensor(const torch::Tensor&)>>;

/// Options of `mha::TransformerEncoderLayer` and `mha::TransformerDecoderLayer`,
/// with the names and defaults of Python's keyword arguments.
struct TransformerLayerOptions {
  /// `nhead` must divide `d_model`.
  TransformerLayerOptions(int64_t d_model, int64_t nhead) : d_model_(d_model), nhead_(nhead) {}

  /// Validates the options of the layer's attention (`MultiheadAttentionOptions::validate`,
  /// Python's checks and wording). The layers' `reset()` calls it first.
  void validate() const;

  /// Model width E of the inputs and outputs.
  TORCH_ARG(int64_t, d_model);
  /// Number of attention heads.
  TORCH_ARG(int64_t, nhead);
  /// Hidden width of the feed-forward network.
  TORCH_ARG(int64_t, dim_feedforward) = 2048;
  /// Dropout probability (attention, feed-forward and residual branches), training only.
  TORCH_ARG(double, dropout) = 0.1;
  /// Feed-forward activation: `torch::kReLU`, `torch::kGELU` or any function.
  TORCH_ARG(TransformerActivation, activation) = torch::kReLU;
  /// The LayerNorms' eps.
  TORCH_ARG(double, layer_norm_eps) = 1e-5;
  /// Batched inputs and outputs are (N, L, E) instead of (L, N, E).
  TORCH_ARG(bool, batch_first) = false;
  /// LayerNorm before attention and feed-forward (pre-norm) instead of after.
  TORCH_ARG(bool, norm_first) = false;
  /// Biases in the Linear and LayerNorm layers (and attention projections).
  TORCH_ARG(bool, bias) = true;
};
/// Options of `mha::TransformerEncoderLayer`.
using TransformerEncoderLayerOptions = TransformerLayerOptions;
/// Options of `mha::TransformerDecoderLayer`.
using TransformerDecoderLayerOptions = TransformerLayerOptions;

/// Python's `torch.nn.TransformerEncoderLayer` (PyTorch 2.13): self-attention
/// and feed-forward, the same parameters under the same names and order
/// (`self_attn.*`, `linear1.*`, `linear2.*`, `norm1.*`, `norm2.*`), the same
/// numbers, and Python's fast path (`at::_transformer_encoder_layer_fwd`)
/// under Python's conditions.
///
/// Example:
/// ```
/// mha::TransformerEncoderLayer layer(
///     mha::TransformerEncoderLayerOptions(16, 4).dim_feedforward(32).batch_first(true));
/// auto y = layer(torch::randn({2, 5, 16}));  // (N, L, E)
/// ```
class TransformerEncoderLayerImpl : public detail::ConvertibleModule<TransformerEncoderLayerImpl> {
 public:
  /// Same as `TransformerEncoderLayerImpl(TransformerEncoderLayerOptions(d_model, nhead))`.
  TransformerEncoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerEncoderLayerImpl(TransformerEncoderLayerOptions(d_model, nhead)) {}
  /// Builds the submodules in Python's order (so seeded inits match Python's).
  explicit TransformerEncoderLayerImpl(TransformerEncoderLayerOptions options_)
      : options(std::move(options_)) {
    reset();
  }

  /// Python's `TransformerEncoderLayer.forward`. src (L, N, E), (N, L, E) with
  /// `batch_first`, or unbatched (L, E); `src_mask` (L, L) or (N * nhead, L, L),
  /// `src_key_padding_mask` (N, L) or (L), bool (true = masked) or float
  /// (added); `is_causal` hints that `src_mask` is the causal mask.
  /// Returns the output, shaped as src.
  torch::Tensor forward(const torch::Tensor& src,
                        const torch::Tensor& src_mask = {},
                        const torch::Tensor& src_key_padding_mask = {},
                        bool is_causal = false);

  /// `forward` of several sequences at once, without masks, eval only: `src`
  /// (T, E) holds their rows one after another, sequence i's at
  /// [cu_seqlens[i], cu_seqlens[i + 1]). Each sequence attends over its own
  /// rows only; the projections and the feed-forward run once over all T
  /// rows (no padding). Returns (T, E), each sequence's rows within float32
  /// rounding of `forward` on it alone.
  torch::Tensor forward_packed(const torch::Tensor& src, const torch::Tensor& cu_seqlens);

  /// Incremental decoding of a causal (decoder-only) layer, eval only: `src`
  /// holds the new positions, shaped as for `forward`; they attend to the
  /// positions in `cache` (a `KVCache::self_attention()`) and causally to
  /// each other. Returns them within float32 rounding of the matching rows of
  /// `forward` on the whole prefix with the causal `src_mask`.
  /// `key_padding_mask` (N, S) or (S), S the cached plus new positions, masks
  /// keys as `MultiheadAttentionImpl::forward_cached`'s (left-padded batches).
  /// Bad input throws `c10::Error` before the cache changes.
  torch::Tensor forward_cached(const torch::Tensor& src,
                               KVCache& cache,
                               const torch::Tensor& key_padding_mask = {});

  /// `forward_cached` for several sequences at once: `src` (T, E) holds their
  /// new positions as rows, sequence i's at [cu_seqlens[i], cu_seqlens[i + 1]),
  /// through `cache` (`MultiheadAttentionImpl::forward_paged`). A cache that
  /// shares its block table with other layers' (`make_paged_cache`) grows only
  /// in the stack's `TransformerEncoderImpl::forward_paged`.
  torch::Tensor forward_paged(const torch::Tensor& src,
                              PagedKVCache& cache,
                              const std::vector<int64_t>& seq_ids,
                              const torch::Tensor& cu_seqlens);

  /// Registers the submodules in Python's order and initialises them.
  void reset() override;
  /// Prints the options, e.g. `mha::TransformerEncoderLayer(d_model=16, nhead=4, ...)`.
  void pretty_print(std::ostream& stream) const override;

  /// The options this module was constructed with.
  TransformerEncoderLayerOptions options;
  /// Self-attention.
  MultiheadAttention self_attn{nullptr};
  /// Feed-forward input (dim_feedforward, d_model).
  torch::nn::Linear linear1{nullptr};
  /// Dropout after the activation.
  torch::nn::Dropout dropout{nullptr};
  /// Feed-forward output (d_model, dim_feedforward).
  torch::nn::Linear linear2{nullptr};
  /// Norm of the attention block.
  LayerNorm norm1{nullptr};
  /// Norm of the feed-forward block.
  LayerNorm norm2{nullptr};
  /// Dropout on the attention block's output.
  torch::nn::Dropout dropout1{nullptr};
  /// Dropout on the feed-forward block's output.
  torch::nn::Dropout dropout2{nullptr};

 protected:
  // Python's defaults, for AnyModule and Sequential: masks None, is_causal False.
  FORWARD_HAS_DEFAULT_ARGS({1, torch::nn::AnyValue(torch::Tensor())},
                           {2, torch::nn::AnyValue(torch::Tensor())},
                           {3, torch::nn::AnyValue(false)})

 private:
  torch::Tensor sa_block(const torch::Tensor& x,
                         const torch::Tensor& attn_mask,
                         const torch::Tensor& key_padding_mask,
                         bool is_causal);
  torch::Tensor ff_block(const torch::Tensor& x);
  // The layer's body (Python's forward past the fast path) with `self_block` as
  // its self-attention: forward's, forward_cached's, forward_paged's, forward_packed's.
  torch::Tensor forward_with(const torch::Tensor& src,
                             const std::function<torch::Tensor(const torch::Tensor&)>& self_block);
};

/// A `ModuleHolder` for `TransformerEncoderLayerImpl`.
TORCH_MODULE(TransformerEncoderLayer);

/// Python's `torch.nn.TransformerDecoderLayer` (PyTorch 2.13): self-attention,
/// cross-attention on `memory` and feed-forward, with Python's names
/// (`self_attn.*`, `multihead_attn.*`, `linear1.*`, `linear2.*`, `norm1.*`,
/// `norm2.*`, `norm3.*`) and numbers. Python has no fast path here.
///
/// Example:
/// ```
/// mha::TransformerDecoderLayer layer(mha::TransformerDecoderLayerOptions(16, 4));
/// auto y = layer(torch::randn({5, 2, 16}), torch::randn({7, 2, 16}));  // (T, N, E)
/// ```
class TransformerDecoderLayerImpl : public detail::ConvertibleModule<TransformerDecoderLayerImpl> {
 public:
  /// Same as `TransformerDecoderLayerImpl(TransformerDecoderLayerOptions(d_model, nhead))`.
  TransformerDecoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerDecoderLayerImpl(TransformerDecoderLayerOptions(d_model, nhead)) {}
  /// Builds the submodules in Python's order (so seeded inits match Python's).
  explicit TransformerDecoderLayerImpl(TransformerDecoderLayerOptions options_)
      : options(std::move(options_)) {
    reset();
  }

  /// Python's `TransformerDecoderLayer.forward`. tgt (T, N, E), memory (S, N, E)
  /// (batch first or unbatched likewise); `tgt_mask` (T, T) or (N * nhead, T, T),
  /// `memory_mask` (T, S) or (N * nhead, T, S), padding masks (N, T) and (N, S);
  /// the `*_is_causal` flags hint that the matching mask is causal.
  /// Returns the output, shaped as tgt.
  torch::Tensor forward(const torch::Tensor& tgt,
                        const torch::Tensor& memory,
                        const torch::Tensor& tgt_mask = {},
                        const torch::Tensor& memory_mask = {},
                        const torch::Tensor& tgt_key_padding_mask = {},
                        const torch::Tensor& memory_key_padding_mask = {},
                        bool tgt_is_causal = false,
                        bool memory_is_causal = false);

  /// Incremental decoding (eval only; records no autograd graph). `tgt` holds
  /// the new positions only, (L, N, E), (N, L, E) with `batch_first`, or
  /// (L, E); they attend causally to the positions in `cache.self_attn` and
  /// to themselves, then to the memory projected into `cache.multihead_attn`.
  /// `memory` (S, N, E) is required on the first call, which projects it;
  /// later calls pass the same memory (only its shape is checked) or an
  /// undefined tensor. `tgt_key_padding_mask` (N, t0 + L) covers the t0
  /// cached and the L new positions; `memory_key_padding_mask` (N, S). Returns
  /// the new positions' output, shaped as tgt: within float32 rounding of the
  /// matching rows of `forward` on the whole prefix with a causal `tgt_mask`.
  /// Bad input throws `c10::Error` before the cache changes.
  torch::Tensor forward_cached(const torch::Tensor& tgt,
                               const torch::Tensor& memory,
                               TransformerDecoderLayerCache& cache,
                               const torch::Tensor& tgt_key_padding_mask = {},
                               const torch::Tensor& memory_key_padding_mask = {});

  /// Paged decoding of several sequences at once (eval only; no autograd
  /// graph): `tgt` (T, E) holds their new positions as rows, sequence i's at
  /// [cu_seqlens[i], cu_seqlens[i + 1]), attending causally through
  /// `self_cache` and to their memories in `cross_cache` (a `static_kv`
  /// `PagedKVCache`); `memory` (S_total, E) holds the memories of the
  /// sequences that have none there yet (`cu_seqlens_memory`), or is
  /// undefined. Each sequence's rows equal `forward_cached` of it alone within
  /// float32 rounding. Both attention calls are checked before either cache
  /// changes (`MultiheadAttentionImpl::forward_paged`). Caches that share a
  /// block table with other layers' (`TransformerDecoderImpl::make_paged_cache`)
  /// grow only in the stack's `TransformerDecoderImpl::forward_paged`.
  torch::Tensor forward_paged(const torch::Tensor& tgt,
                              const torch::Tensor& memory,
                              PagedKVCache& self_cache,
                              PagedKVCache& cross_cache,
                              const std::vector<int64_t>& seq_ids,
                              const torch::Tensor& cu_seqlens,
                              const torch::Tensor& cu_seqlens_memory = {});

  /// Registers the submodules in Python's order and initialises them.
  void reset() override;
  /// Prints the options, e.g. `mha::TransformerDecoderLayer(d_model=16, nhead=4, ...)`.
  void pretty_print(std::ostream& stream) const override;

  /// The options this module was constructed with.
  TransformerDecoderLayerOptions options;
  /// Self-attention on tgt.
  MultiheadAttention self_attn{nullptr};
  /// Cross-attention from tgt to memory.
  MultiheadAttention multihead_attn{nullptr};
  /// Feed-forward input (dim_feedforward, d_model).
  torch::nn::Linear linear1{nullptr};
  /// Dropout after the activation.
  torch::nn::Dropout dropout{nullptr};
  /// Feed-forward output (d_model, dim_feedforward).
  torch::nn::Linear linear2{nullptr};
  /// Norm of the self-attention block.
  LayerNorm norm1{nullptr};
  /// Norm of the cross-attention block.
  LayerNorm norm2{nullptr};
  /// Norm of the feed-forward block.
  LayerNorm norm3{nullptr};
  /// Dropout on the self-attention block's output.
  torch::nn::Dropout dropout1{nullptr};
  /// Dropout on the cross-attention block's output.
  torch::nn::Dropout dropout2{nullptr};
  /// Dropout on the feed-forward block's output.
  torch::nn::Dropout dropout3{nullptr};

 protected:
  // Python's defaults, for AnyModule and Sequential: masks None, *_is_causal False.
  FORWARD_HAS_DEFAULT_ARGS({2, torch::nn::AnyValue(torch::Tensor())},
                           {3, torch::nn::AnyValue(torch::Tensor())},
                           {4, torch::nn::AnyValue(torch::Tensor())},
                           {5, torch::nn::AnyValue(torch::Tensor())},
                           {6, torch::nn::AnyValue(false)},
                           {7, torch::nn::AnyValue(false)})

 private:
  // One method per block, as Python's `_sa_block`/`_mha_block`/`_ff_block`:
  // forward_cached only swaps the two attention calls.
  torch::Tensor sa_block(const torch::Tensor& x,
                         const torch::Tensor& attn_mask,
                         const torch::Tensor& key_padding_mask,
                         bool is_causal);
  torch::Tensor mha_block(const torch::Tensor& x,
                          const torch::Tensor& memory,
                          const torch::Tensor& attn_mask,
                          const torch::Tensor& key_padding_mask,
                          bool is_causal);
  torch::Tensor ff_block(const torch::Tensor& x);
  // The layer's body with `self_block` and `cross_block` as its attentions:
  // forward's, forward_cached's and forward_paged's.
  torch::Tensor forward_with(const torch::Tensor& tgt,
                             const std::function<torch::Tensor(const torch::Tensor&)>& self_block,
                             const std::function<torch::Tensor(const torch::Tensor&)>& cross_block);
  // forward_cached's attention blocks (eval only, so without dropout).
  torch::Tensor sa_block_cached(const torch::Tensor& x,
                                KVCache& cache,
                                const torch::Tensor& key_padding_mask);
  torch::Tensor mha_block_cached(const torch::Tensor& x,
                                 const torch::Tensor& memory,
                                 KVCache& cache,
                                 const torch::Tensor& key_padding_mask);
};

/// A `ModuleHolder` for `TransformerDecoderLayerImpl`.
TORCH_MODULE(TransformerDecoderLayer);

}  // namespace mha
