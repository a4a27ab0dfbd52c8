#pragma once

// Rotary position embeddings as transformers 5.23 computes them for the
// Llama-shaped decoders: the inverse frequencies and attention scaling of each
// rope type (modeling_rope_utils.py: default, linear, dynamic, yarn, longrope,
// llama3), the cos and sin of positions (models/llama/modeling_llama.py's
// `LlamaRotaryEmbedding`, frequencies updated by the positions for dynamic and
// longrope) and their application to queries and keys (`apply_rotary_pos_emb`,
// the first `rotary_dim` features of each head where the rotation is partial).

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace mha {

/// A config's `rope_parameters` (transformers 5.23's names; older configs'
/// `rope_scaling` and `rope_theta` read into them by `read_rope_parameters`).
struct RopeParameters {
  /// "default", "linear", "dynamic", "yarn", "longrope" or "llama3".
  TORCH_ARG(std::string, rope_type) = "default";
  /// The base wavelength.
  TORCH_ARG(double, rope_theta) = 10000.0;
  /// The fraction of each head's features that is rotated.
  TORCH_ARG(double, partial_rotary_factor) = 1.0;
  /// linear, dynamic, yarn, llama3: the scaling factor (yarn, longrope:
  /// unset means max_position_embeddings / original_max_position_embeddings).
  TORCH_ARG(std::optional<double>, factor) = std::nullopt;
  /// yarn, longrope, llama3: the pretraining length.
  TORCH_ARG(std::optional<int64_t>, original_max_position_embeddings) = std::nullopt;
  /// yarn, longrope: the cos and sin scaling (unset: inferred from the factor).
  TORCH_ARG(std::optional<double>, attention_factor) = std::nullopt;
  /// yarn's ramp bounds (unset: 32 and 1), its `mscale`, `mscale_all_dim` and `truncate`.
  TORCH_ARG(std::optional<double>, beta_fast) = std::nullopt;
  TORCH_ARG(std::optional<double>, beta_slow) = std::nullopt;
  TORCH_ARG(std::optional<double>, mscale) = std::nullopt;
  TORCH_ARG(std::optional<double>, mscale_all_dim) = std::nullopt;
  TORCH_ARG(bool, truncate) = true;
  /// longrope: the per-frequency factors past and within the pretraining length.
  TORCH_ARG(std::vector<double>, long_factor) = {};
  TORCH_ARG(std::vector<double>, short_factor) = {};
  /// llama3's frequency bands.
  TORCH_ARG(std::optional<double>, low_freq_factor) = std::nullopt;
  TORCH_ARG(std::optional<double>, high_freq_factor) = std::nullopt;
};

/// The inverse frequencies (rotary_dim / 2) float32 and the attention scaling
/// of `rope` for heads of `head_dim` features, as transformers' rope init
/// function of its type computes them; `seq_len` as that function's argument
/// (dynamic, longrope: the length the frequencies are for; unset: at load).
/// A missing parameter of the type is a `c10::Error` naming it.
std::pair<torch::Tensor, double> rope_frequencies(const RopeParameters& rope,
                                                  int64_t head_dim,
                                                  int64_t max_position_embeddings,
                                                  std::optional<int64_t> seq_len = std::nullopt);

/// Options of `mha::RotaryEmbedding`.
struct RotaryEmbeddingOptions {
  /// Heads of `head_dim` features, positions up to `max_position_embeddings`.
  RotaryEmbeddingOptions(int64_t head_dim, int64_t max_position_embeddings)
      : head_dim_(head_dim), max_position_embeddings_(max_position_embeddings) {}
  TORCH_ARG(int64_t, head_dim);
  TORCH_ARG(int64_t, max_position_embeddings);
  /// The rope type and its parameters.
  TORCH_ARG(RopeParameters, rope) = {};
};

/// transformers' `LlamaRotaryEmbedding`: the cos and sin of positions. For
/// dynamic and longrope its frequencies follow the positions it is given, as
/// transformers' `dynamic_rope_update` changes them: dynamic recomputes them
/// for a longer sequence than any before and goes back to the loaded ones
/// below the original length; longrope takes its long factors past the
/// pretraining length.
class RotaryEmbeddingImpl : public torch::nn::Cloneable<RotaryEmbeddingImpl> {
 public:
  /// Computes the frequencies at load (`rope_frequencies` without a length).
  explicit RotaryEmbeddingImpl(RotaryEmbeddingOptions options_) : options(std::move(options_)) {
    reset();
  }

  /// `position_ids` (N, L) int64 -> cos and sin (N, L, rotary_dim) float32,
  /// times the attention scaling.
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& position_ids);

  /// (Re)computes the frequencies at load.
  void reset() override;
  /// Prints `mha::RotaryEmbedding(rope_type=default, head_dim=64)`.
  void pretty_print(std::ostream& stream) const override;

  /// The options this module was constructed with.
  RotaryEmbeddingOptions options;
  /// The inverse frequencies in use (rotary_dim / 2), a buffer (not saved by transformers).
  torch::Tensor inv_freq;
  /// The cos and sin scaling.
  double attention_scaling = 1.0;

 private:
  /// dynamic, longrope: `inv_freq` for positions up to `seq_len`.
  void update_frequencies(int64_t seq_len);

  torch::Tensor original_inv_freq_;  ///< the frequencies at load
  torch::Tensor long_inv_freq_;      ///< longrope past the pretraining length
  int64_t max_seq_len_cached_ = 0;   ///< dynamic: the length `inv_freq` is for
};

/// A `ModuleHolder` for `RotaryEmbeddingImpl`.
TORCH_MODULE(RotaryEmbedding);

/// transformers' `apply_rotary_pos_emb` on one tensor: `x` (N, H, L, D)
/// rotated by `cos` and `sin` (N, L, d) from `RotaryEmbedding`, d <= D (the
/// first d features of each head; the rest pass): x * cos + rotate_half(x) * sin.
torch::Tensor apply_rotary_pos_emb(const torch::Tensor& x,
                                   const torch::Tensor& cos,
                                   const torch::Tensor& sin);

}  // namespace mha
