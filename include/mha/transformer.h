#pragma once

// Python's torch.nn.Transformer: an encoder and a decoder stack
// (mha/transformer_coder.h) with their final norms, as PyTorch's C++ frontend
// keeps it (torch/nn/modules/transformer.h); including this header gives the
// stacks and the layers too.

#include <mha/convertible_module.h>
#include <mha/transformer_coder.h>
#include <torch/arg.h>
#include <torch/nn/modules/common.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <utility>

namespace mha {

/// Options of `mha::Transformer`, with the names and defaults of Python's
/// `torch.nn.Transformer` keyword arguments.
struct TransformerOptions {
  /// Python's defaults: d_model 512, nhead 8, 6 + 6 layers.
  TransformerOptions() = default;
  /// The model width and number of heads.
  TransformerOptions(int64_t d_model, int64_t nhead) : d_model_(d_model), nhead_(nhead) {}
  /// Also the number of encoder and decoder layers.
  TransformerOptions(int64_t d_model,
                     int64_t nhead,
                     int64_t num_encoder_layers,
                     int64_t num_decoder_layers)
      : d_model_(d_model),
        nhead_(nhead),
        num_encoder_layers_(num_encoder_layers),
        num_decoder_layers_(num_decoder_layers) {}

  /// Model width E.
  TORCH_ARG(int64_t, d_model) = 512;
  /// Number of attention heads.
  TORCH_ARG(int64_t, nhead) = 8;
  /// Encoder layers (unless `custom_encoder`).
  TORCH_ARG(int64_t, num_encoder_layers) = 6;
  /// Decoder layers (unless `custom_decoder`).
  TORCH_ARG(int64_t, num_decoder_layers) = 6;
  /// Hidden width of the feed-forward networks.
  TORCH_ARG(int64_t, dim_feedforward) = 2048;
  /// Dropout probability, training only.
  TORCH_ARG(double, dropout) = 0.1;
  /// Feed-forward activation.
  TORCH_ARG(TransformerActivation, activation) = torch::kReLU;
  /// Used instead of the built encoder; its forward must take
  /// (Tensor src, Tensor mask, Tensor src_key_padding_mask, std::optional<bool> is_causal).
  TORCH_ARG(torch::nn::AnyModule, custom_encoder);
  /// Used instead of the built decoder; its forward must take
  /// `TransformerDecoderImpl::forward`'s arguments.
  TORCH_ARG(torch::nn::AnyModule, custom_decoder);
  /// The LayerNorms' eps.
  TORCH_ARG(double, layer_norm_eps) = 1e-5;
  /// Batched inputs and outputs are (N, L, E) instead of (L, N, E).
  TORCH_ARG(bool, batch_first) = false;
  /// Pre-norm layers.
  TORCH_ARG(bool, norm_first) = false;
  /// Biases in the Linear and LayerNorm layers.
  TORCH_ARG(bool, bias) = true;
};

/// Python's `torch.nn.Transformer`: `encoder.*` (with its final `norm`) and
/// `decoder.*`, every parameter with dim > 1 re-initialised by
/// `xavier_uniform_` as Python's `_reset_parameters` does.
///
/// Example:
/// ```
/// mha::Transformer model(mha::TransformerOptions(16, 4, 2, 2).dim_feedforward(32));
/// auto tgt_mask = mha::generate_square_subsequent_mask(5);
/// auto y = model(torch::randn({7, 2, 16}), torch::randn({5, 2, 16}), torch::Tensor(), tgt_mask);
/// ```
class TransformerImpl : public detail::ConvertibleModule<TransformerImpl> {
 public:
  /// Builds the encoder and decoder (or takes the custom ones) and re-initialises.
  explicit TransformerImpl(TransformerOptions options_ = {}) : options(std::move(options_)) {
    reset();
  }

  /// Python's `Transformer.forward`: src (S, N, E), tgt (T, N, E) (batch first
  /// or unbatched likewise); masks as the encoder's and decoder's.
  torch::Tensor forward(const torch::Tensor& src,
                        const torch::Tensor& tgt,
                        const torch::Tensor& src_mask = {},
                        const torch::Tensor& tgt_mask = {},
                        const torch::Tensor& memory_mask = {},
                        const torch::Tensor& src_key_padding_mask = {},
                        const torch::Tensor& tgt_key_padding_mask = {},
                        const torch::Tensor& memory_key_padding_mask = {},
                        std::optional<bool> src_is_causal = std::nullopt,
                        std::optional<bool> tgt_is_causal = std::nullopt,
                        bool memory_is_causal = false);

  /// The encoder alone (Python's `model.encoder(src, mask, src_key_padding_mask,
  /// is_causal)`): the memory for `decode_cached`, shaped as src. Changes
  /// nothing in the model.
  torch::Tensor encode(const torch::Tensor& src,
                       const torch::Tensor& src_mask = {},
                       const torch::Tensor& src_key_padding_mask = {},
                       std::optional<bool> src_is_causal = std::nullopt) const;

  /// `TransformerDecoderImpl::make_cache` of the decoder (which must be the
  /// built one or a `TransformerDecoder` given as `custom_decoder`).
  TransformerDecoderCache make_decoder_cache(int64_t max_len = 0) const;

  /// `TransformerDecoderImpl::forward_cached` of the decoder: one greedy or
  /// beam step (or a prompt) given the memory from `encode`.
  ///
  /// Example:
  /// ```
  /// mha::Transformer model(mha::TransformerOptions(16, 4, 2, 2).dim_feedforward(32));
  /// model->eval();
  /// auto memory = model->encode(torch::randn({7, 2, 16}));  // (S, N, E)
  /// auto cache = model->make_decoder_cache();
  /// auto y = model->decode_cached(torch::randn({1, 2, 16}), memory, cache);  // (1, N, E)
  /// ```
  torch::Tensor decode_cached(const torch::Tensor& tgt,
                              const torch::Tensor& memory,
                              TransformerDecoderCache& cache,
                              const torch::Tensor& tgt_key_padding_mask = {},
                              const torch::Tensor& memory_key_padding_mask = {});

  /// Registers `encoder` and `decoder` and calls `reset_parameters`.
  void reset() override;
  /// Python's `_reset_parameters`: `xavier_uniform_` on every parameter with dim > 1.
  void reset_parameters();
  /// Prints `mha::Transformer(d_model=16, nhead=4, ...)`.
  void pretty_print(std::ostream& stream) const override;

  /// Python's `Transformer.generate_square_subsequent_mask`.
  static torch::Tensor generate_square_subsequent_mask(int64_t sz,
                                                       const torch::TensorOptions& options = {});

  /// The options this module was constructed with.
  TransformerOptions options;
  /// The encoder: a `TransformerEncoder` or `custom_encoder`.
  torch::nn::AnyModule encoder;
  /// The decoder: a `TransformerDecoder` or `custom_decoder`.
  torch::nn::AnyModule decoder;

 protected:
  // Python's defaults, for AnyModule and Sequential: masks None, *_is_causal None/False.
  FORWARD_HAS_DEFAULT_ARGS({2, torch::nn::AnyValue(torch::Tensor())},
                           {3, torch::nn::AnyValue(torch::Tensor())},
                           {4, torch::nn::AnyValue(torch::Tensor())},
                           {5, torch::nn::AnyValue(torch::Tensor())},
                           {6, torch::nn::AnyValue(torch::Tensor())},
                           {7, torch::nn::AnyValue(torch::Tensor())},
                           {8, torch::nn::AnyValue(std::optional<bool>())},
                           {9, torch::nn::AnyValue(std::optional<bool>())},
                           {10, torch::nn::AnyValue(false)})

 private:
  /// The decoder as a `TransformerDecoderImpl` (a c10::Error if it is not);
  /// const as `decoder.ptr()` is: the handle, not the module it points to.
  TransformerDecoderImpl& cached_decoder() const;
};

/// A `ModuleHolder` for `TransformerImpl`.
TORCH_MODULE(Transformer);

}  // namespace mha
