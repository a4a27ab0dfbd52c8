#pragma once

// Python's torch.nn.TransformerEncoder and TransformerDecoder (the stacks of
// layers), as PyTorch's C++ frontend keeps them apart from Transformer
// (torch/nn/modules/transformercoder.h); the causal-mask helpers they use.

#include <mha/convertible_module.h>
#include <mha/paged_stack_cache.h>
#include <mha/transformer_cache.h>
#include <mha/transformer_layers.h>
#include <torch/arg.h>
#include <torch/nn/modules/common.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace mha {

/// Python's `_generate_square_subsequent_mask`: (sz, sz), -inf above the
/// diagonal and 0 elsewhere, of `options`' dtype and device.
torch::Tensor generate_square_subsequent_mask(int64_t sz, const torch::TensorOptions& options = {});

/// Python's `_detect_is_causal_mask`: `is_causal` when given; otherwise, with a
/// mask, whether it has the causal mask's size, (`size`, `size`) or (size(-2),
/// size(-2)) without `size`, and equals it element for element; false without
/// a mask (a batched mask is never detected as causal).
bool detect_is_causal_mask(const torch::Tensor& mask,
                           std::optional<bool> is_causal = std::nullopt,
                           std::optional<int64_t> size = std::nullopt);

/// Options of `mha::TransformerEncoder`, as Python's constructor arguments.
struct TransformerEncoderOptions {
  /// The layer deep-copied `num_layers` times (Python's `_get_clones`).
  TransformerEncoderOptions(TransformerEncoderLayer encoder_layer, int64_t num_layers)
      : encoder_layer_(std::move(encoder_layer)), num_layers_(num_layers) {}

  /// The layer whose deep copies make the stack.
  TORCH_ARG(TransformerEncoderLayer, encoder_layer);
  /// Number of layers.
  TORCH_ARG(int64_t, num_layers);
  /// Optional final norm (empty = none), e.g. `mha::LayerNorm`; registered as `norm`.
  TORCH_ARG(torch::nn::AnyModule, norm);
  /// Convert padded batches to nested tensors on Python's fast path.
  TORCH_ARG(bool, enable_nested_tensor) = true;
  /// Check that the padding mask is left aligned before converting.
  TORCH_ARG(bool, mask_check) = true;
};

/// Python's `torch.nn.TransformerEncoder`: `layers.0.*` ... and `norm.*`, the
/// nested-tensor fast path where Python takes it (padded positions come out
/// as zeros, then through the final norm), and causal-mask detection.
///
/// Example:
/// ```
/// mha::TransformerEncoder encoder(mha::TransformerEncoderOptions(
///     mha::TransformerEncoderLayer(mha::TransformerEncoderLayerOptions(16, 4)), 2));
/// auto y = encoder(torch::randn({5, 2, 16}));
/// ```
class TransformerEncoderImpl : public detail::ConvertibleModule<TransformerEncoderImpl> {
 public:
  /// Clones the layer `num_layers` times; warns as Python does when
  /// `enable_nested_tensor` is set but the layer cannot use nested tensors,
  /// each reason once per process (Python's default warning filter), not
  /// once per stack built.
  explicit TransformerEncoderImpl(TransformerEncoderOptions options);

  /// Python's `TransformerEncoder.forward`: src as the layer's, `mask` (L, L)
  /// or (N * nhead, L, L), `src_key_padding_mask` (N, L); `is_causal` unset
  /// means detect it from `mask`. Returns the output, shaped as src.
  torch::Tensor forward(const torch::Tensor& src,
                        const torch::Tensor& mask = {},
                        const torch::Tensor& src_key_padding_mask = {},
                        std::optional<bool> is_causal = std::nullopt);

  /// An empty cache for `forward_cached` of a causal (decoder-only) stack,
  /// the way PyTorch's building blocks make a GPT (`forward` with the causal
  /// `mask`): one `KVCache::self_attention(max_len)` per layer; `max_len > 0`
  /// fixes the capacity, 0 grows by doubling.
  TransformerEncoderCache make_cache(int64_t max_len = 0) const;

  /// Incremental decoding of a causal stack (eval only): each layer's
  /// `TransformerEncoderLayerImpl::forward_cached` with its cache, then the
  /// final norm. `src` holds the new positions (a prompt, then one position per
  /// step). Returns them within float32 rounding of `forward` on the whole
  /// prefix with the causal mask. `key_padding_mask` (N, S), S the cached
  /// plus new positions, masks keys in every layer (a left-padded batch's
  /// padding). `cache` must come from this stack's `make_cache`; bad input
  /// throws `c10::Error` before any cache changes.
  torch::Tensor forward_cached(const torch::Tensor& src,
                               TransformerEncoderCache& cache,
                               const torch::Tensor& key_padding_mask = {});

  /// The paged caches of every layer's self-attention over one block table
  /// (`PagedStackCache`): `add_sequence`, `fork` and `release` act on all
  /// layers, and `forward_paged` grows the table once per step for every layer.
  PagedStackCache make_paged_cache(const PagedKVCacheOptions& options) const;

  /// `forward_cached` of several sequences at once: `src` (T, E) their new
  /// positions as rows (`cu_seqlens`), `cache` from `make_paged_cache`. All
  /// or nothing: every layer's call is checked once, and the table's free
  /// blocks counted once, before any cache changes; `cu_seqlens` is checked
  /// and copied to the host once per step.
  torch::Tensor forward_paged(const torch::Tensor& src,
                              PagedStackCache& cache,
                              const std::vector<int64_t>& seq_ids,
                              const torch::Tensor& cu_seqlens);

  /// `forward` of several sequences at once, without masks, eval only: `src`
  /// (T, E) holds their rows one after another, sequence i's at
  /// [cu_seqlens[i], cu_seqlens[i + 1]) (int32 or int64, num_seqs + 1
  /// offsets from 0 to T). Every layer's `forward_packed`, then the final
  /// norm: each GEMM runs once over all T rows, with no padding, and each
  /// sequence attends over its own rows. Returns (T, E), each sequence's rows
  /// within float32 rounding of `forward` on it alone (batch of one).
  torch::Tensor forward_packed(const torch::Tensor& src, const torch::Tensor& cu_seqlens);

  /// Registers `layers` (fresh clones of the options' layer) and `norm`.
  void reset() override;
  /// Prints `mha::TransformerEncoder(num_layers=2)`.
  void pretty_print(std::ostream& stream) const override;

  /// The options this module was constructed with.
  TransformerEncoderOptions options;
  /// The layers, `TransformerEncoderLayer`s.
  torch::nn::ModuleList layers{nullptr};
  /// The final norm, or empty.
  torch::nn::AnyModule norm;
  /// Python's `use_nested_tensor`: `enable_nested_tensor` and the layer allows it.
  bool use_nested_tensor = false;

 protected:
  // Python's defaults, for AnyModule and Sequential: masks None, is_causal None.
  FORWARD_HAS_DEFAULT_ARGS({1, torch::nn::AnyValue(torch::Tensor())},
                           {2, torch::nn::AnyValue(torch::Tensor())},
                           {3, torch::nn::AnyValue(std::optional<bool>())})

 private:
  std::string why_not_nested(const torch::Tensor& src,
                             const torch::Tensor& mask,
                             const torch::Tensor& src_key_padding_mask) const;
};

/// A `ModuleHolder` for `TransformerEncoderImpl`.
TORCH_MODULE(TransformerEncoder);

/// Options of `mha::TransformerDecoder`, as Python's constructor arguments.
struct TransformerDecoderOptions {
  /// The layer deep-copied `num_layers` times (Python's `_get_clones`).
  TransformerDecoderOptions(TransformerDecoderLayer decoder_layer, int64_t num_layers)
      : decoder_layer_(std::move(decoder_layer)), num_layers_(num_layers) {}

  /// The layer whose deep copies make the stack.
  TORCH_ARG(TransformerDecoderLayer, decoder_layer);
  /// Number of layers.
  TORCH_ARG(int64_t, num_layers);
  /// Optional final norm (empty = none); registered as `norm`.
  TORCH_ARG(torch::nn::AnyModule, norm);
};

/// Python's `torch.nn.TransformerDecoder`: `layers.0.*` ... and `norm.*`.
class TransformerDecoderImpl : public detail::ConvertibleModule<TransformerDecoderImpl> {
 public:
  /// Clones the layer `num_layers` times.
  explicit TransformerDecoderImpl(TransformerDecoderOptions options_)
      : options(std::move(options_)) {
    reset();
  }

  /// Registers `layers` (fresh clones of the options' layer) and `norm`.
  void reset() override;
  /// Prints `mha::TransformerDecoder(num_layers=2)`.
  void pretty_print(std::ostream& stream) const override;

  /// Python's `TransformerDecoder.forward`: shapes as the layer's;
  /// `tgt_is_causal` unset means detect it from `tgt_mask`.
  torch::Tensor forward(const torch::Tensor& tgt,
                        const torch::Tensor& memory,
                        const torch::Tensor& tgt_mask = {},
                        const torch::Tensor& memory_mask = {},
                        const torch::Tensor& tgt_key_padding_mask = {},
                        const torch::Tensor& memory_key_padding_mask = {},
                        std::optional<bool> tgt_is_causal = std::nullopt,
                        bool memory_is_causal = false);

  /// An empty cache for `forward_cached`: one self-attention and one
  /// cross-attention `KVCache` per layer; `max_len > 0` fixes the
  /// self-attention capacity (decoded positions), 0 grows by doubling.
  TransformerDecoderCache make_cache(int64_t max_len = 0) const;

  /// Incremental decoding (eval only; records no autograd graph): each layer's
  /// `TransformerDecoderLayerImpl::forward_cached` with its caches, then the
  /// final norm. `tgt` holds the new positions only (a prompt, then one
  /// position per step); `memory` is required on the first call, then may be
  /// passed again or undefined; masks as the layer's. Returns the new
  /// positions' output, within float32 rounding of `forward` on the whole
  /// prefix with the causal `tgt_mask`. `cache` must come from this decoder's
  /// `make_cache`; bad input throws `c10::Error` before any cache changes.
  ///
  /// Example:
  /// ```
  /// mha::TransformerDecoder decoder(mha::TransformerDecoderOptions(
  ///     mha::TransformerDecoderLayer(mha::TransformerDecoderLayerOptions(16, 4)), 2));
  /// decoder->eval();
  /// auto cache = decoder->make_cache();
  /// auto memory = torch::randn({7, 2, 16});                                   // (S, N, E)
  /// auto y = decoder->forward_cached(torch::randn({3, 2, 16}), memory, cache);  // prompt
  /// y = decoder->forward_cached(torch::randn({1, 2, 16}), {}, cache);  // one more position
  /// ```
  torch::Tensor forward_cached(const torch::Tensor& tgt,
                               const torch::Tensor& memory,
                               TransformerDecoderCache& cache,
                               const torch::Tensor& tgt_key_padding_mask = {},
                               const torch::Tensor& memory_key_padding_mask = {});

  /// The paged caches of every layer's self-attention over one block table
  /// (`PagedStackCache`), for `forward_paged`.
  PagedStackCache make_paged_cache(const PagedKVCacheOptions& options) const;
  /// The paged caches of every layer's cross-attention (`static_kv`: the
  /// sequences' projected memories) over another block table. Add, fork and
  /// release each sequence in both caches, so that its id is the same in both.
  PagedStackCache make_paged_memory_cache(const PagedKVCacheOptions& options) const;

  /// Paged decoding of several sequences at once through the whole stack
  /// (eval only): each layer's `TransformerDecoderLayerImpl::forward_paged`
  /// with its caches of `self_cache` and `cross_cache`, then the final norm.
  /// `tgt` (T, E) holds the new positions as rows (`cu_seqlens`); `memory`
  /// (S_total, E) the memories of the sequences that have none yet
  /// (`cu_seqlens_memory`), or is undefined. All or nothing: every layer's
  /// calls are checked once, and each table's free blocks counted once,
  /// before any cache changes; each table grows once per step. Returns (T, E).
  torch::Tensor forward_paged(const torch::Tensor& tgt,
                              const torch::Tensor& memory,
                              PagedStackCache& self_cache,
                              PagedStackCache& cross_cache,
                              const std::vector<int64_t>& seq_ids,
                              const torch::Tensor& cu_seqlens,
                              const torch::Tensor& cu_seqlens_memory = {});

  /// The options this module was constructed with.
  TransformerDecoderOptions options;
  /// The layers, `TransformerDecoderLayer`s.
  torch::nn::ModuleList layers{nullptr};
  /// The final norm, or empty.
  torch::nn::AnyModule norm;

 protected:
  // Python's defaults, for AnyModule and Sequential: masks None, tgt_is_causal None.
  FORWARD_HAS_DEFAULT_ARGS({2, torch::nn::AnyValue(torch::Tensor())},
                           {3, torch::nn::AnyValue(torch::Tensor())},
                           {4, torch::nn::AnyValue(torch::Tensor())},
                           {5, torch::nn::AnyValue(torch::Tensor())},
                           {6, torch::nn::AnyValue(std::optional<bool>())},
                           {7, torch::nn::AnyValue(false)})
};

/// A `ModuleHolder` for `TransformerDecoderImpl`.
TORCH_MODULE(TransformerDecoder);

}  // namespace mha
