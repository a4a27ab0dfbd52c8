#pragma once

#include <mha/attention_forward.h>
#include <mha/convertible_module.h>
#include <mha/kernel_switches.h>
#include <mha/multihead_attention_options.h>
#include <torch/arg.h>
#include <torch/nn/modules/common.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <tuple>
#include <vector>

namespace mha {

class KVCache;
class PagedKVCache;

/// Multi-head attention that gives the numbers of Python's
/// `torch.nn.MultiheadAttention` (PyTorch 2.13): the same parameters and
/// names, shapes, mask rules, `is_causal`, fast paths and fully-masked-row
/// behaviour. docs/semantics.md has the details, the calls whose results are
/// within float32 rounding of Python's rather than bitwise, and what differs
/// from LibTorch's `torch::nn::MultiheadAttention`.
///
/// Example:
/// ```
/// mha::MultiheadAttention attn(8, 2);
/// auto x = torch::randn({5, 3, 8});               // (L, N, E)
/// auto [out, weights] = attn(x, x, x);            // (5, 3, 8), (3, 5, 5)
/// ```
class MultiheadAttentionImpl : public detail::ConvertibleModule<MultiheadAttentionImpl>,
                               public AttentionForward,
                               public AttentionParameters {
 public:
  /// Same as `MultiheadAttentionImpl(MultiheadAttentionOptions(embed_dim, num_heads))`.
  MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads)
      : MultiheadAttentionImpl(MultiheadAttentionOptions(embed_dim, num_heads)) {}
  /// Validates `options` (as Python's constructor does) and initialises the
  /// parameters with Python's scheme.
  explicit MultiheadAttentionImpl(const MultiheadAttentionOptions& options);

  // forward(query, key, value, key_padding_mask, need_weights, attn_mask,
  // average_attn_weights, is_causal): AttentionForward's.

  /// Incremental decoding (eval mode only): attends the new positions in
  /// `query` over the keys and values held by `cache` (`<mha/kv_cache.h>`),
  /// which this call fills. Self-attention cache: `key`/`value` are the new
  /// positions (same length as `query`), appended to the cache; new query i
  /// sees cached or new key j iff j <= cache.length() + i (the causal mask
  /// aligned to the bottom right). Static cache: the first call projects
  /// `key`/`value` (the memory), later calls pass undefined ones. Shapes as in
  /// `forward`, with S the total key length after the call (cached + new):
  /// `key_padding_mask` (N, S) or (S), `attn_mask` (L, S) or (N * H, L, S),
  /// added to the causal mask. The output equals the matching rows of
  /// `forward` on the whole sequence with the explicit causal mask; weights
  /// columns are the S keys, then `bias_k`, then the zero row. Records no
  /// autograd graph. Throws c10::Error naming the argument on bad input, and
  /// then leaves cache and module unchanged. See docs/decoding.md.
  std::tuple<torch::Tensor, torch::Tensor> forward_cached(
      const torch::Tensor& query,
      const torch::Tensor& key,
      const torch::Tensor& value,
      KVCache& cache,
      const torch::Tensor& key_padding_mask = {},
      bool need_weights = false,
      const torch::Tensor& attn_mask = {},
      bool average_attn_weights = true);

  /// Incremental self-attention for several sequences at once (eval mode
  /// only): `query`, `key` and `value` (T, E) hold the new positions of the
  /// sequences `seq_ids` packed one after another, sequence i's at rows
  /// [cu_seqlens[i], cu_seqlens[i + 1]) (`cu_seqlens` 1-D of num_seqs + 1
  /// offsets from 0 to T, int32 as PyTorch's `varlen_attn` takes them, or
  /// int64). Each sequence's new queries attend to its own cached and new keys
  /// in `cache` (`<mha/paged_kv_cache.h>`), which this call fills, with the
  /// causal mask aligned to the bottom right: each sequence's rows equal
  /// `forward_cached` of that sequence alone, within float32 rounding (the
  /// projections run over all T rows at once). Returns (T, E) and undefined
  /// weights. With a `static_kv` cache (cross-attention), `key`/`value`
  /// (S_total, kdim/vdim) hold the memories of the sequences that have none
  /// yet, sequence i's at rows [cu_seqlens_kv[i], cu_seqlens_kv[i + 1]) (0 rows
  /// for those that have one), or are undefined; queries attend to their
  /// sequence's whole memory. `bias_k`/`bias_v` and `add_zero_attn` are not
  /// supported. Bad input (unknown or repeated ids, wrong offsets, out of
  /// blocks, another module's cache, dtypes) throws `c10::Error` and changes no
  /// sequence.
  std::tuple<torch::Tensor, torch::Tensor> forward_paged(const torch::Tensor& query,
                                                         const torch::Tensor& key,
                                                         const torch::Tensor& value,
                                                         PagedKVCache& cache,
                                                         const std::vector<int64_t>& seq_ids,
                                                         const torch::Tensor& cu_seqlens,
                                                         const torch::Tensor& cu_seqlens_kv = {});

  /// Validates the options, registers every parameter (absent ones as
  /// undefined, so `named_parameters()` equals Python's `state_dict()` keys and
  /// order) and initialises them.
  void reset() override;

  /// Python's `_reset_parameters`: xavier_uniform_ input projections, zero
  /// biases, xavier_normal_ `bias_k`/`bias_v`, default Linear init for
  /// `out_proj.weight`.
  void reset_parameters();

  /// Prints e.g. `mha::MultiheadAttention(embed_dim=8, num_heads=2, batch_first=true)`.
  void pretty_print(std::ostream& stream) const override;

  /// The options this module was constructed with.
  MultiheadAttentionOptions options;

 protected:
  /// `forward`'s call: checked (unless the layer that runs it checked it),
  /// planned and run.
  std::tuple<torch::Tensor, torch::Tensor> forward_call(const detail::AttentionCall& call) override;

  MHA_ATTENTION_FORWARD_DEFAULT_ARGS

 private:
  /// True when kdim == vdim == embed_dim (Python's `_qkv_same_embed_dim`).
  bool qkv_same_embed_dim() const;
};

/// A `ModuleHolder` for `MultiheadAttentionImpl` (shared ownership, `->`).
TORCH_MODULE(MultiheadAttention);

}  // namespace mha
