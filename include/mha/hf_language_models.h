#pragma once

// Whole language models of Hugging Face families (`mha::load_hf_model` makes
// them from a checkpoint directory): sequence-to-sequence (bart, mbart,
// marian) and decoder-only (gpt2, opt), from token ids to logits, with the
// cached (and, for decoder-only models, paged) steps of incremental decoding.
// The LM head is tied to the token embeddings where the checkpoint ties them:
// one copy of the values in memory, listed under both names (as Python's
// `state_dict`), kept tied by `clone()`, `to()` and `torch::load`.

#include <mha/convertible_module.h>
#include <mha/kv_cache.h>
#include <mha/layer_norm.h>
#include <mha/paged_kv_cache.h>
#include <mha/transformer.h>
#include <mha/transformer_cache.h>
#include <torch/arg.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace mha {

/// Options of `mha::Seq2SeqLM` (transformers' BART config fields).
struct Seq2SeqLMOptions {
  /// `model_type` ("bart", "mbart", "marian") and each stack's layer options and layer count.
  Seq2SeqLMOptions(std::string model_type,
                   TransformerLayerOptions encoder_layer,
                   int64_t num_encoder_layers,
                   TransformerLayerOptions decoder_layer,
                   int64_t num_decoder_layers)
      : model_type_(std::move(model_type)),
        encoder_layer_(std::move(encoder_layer)),
        num_encoder_layers_(num_encoder_layers),
        decoder_layer_(std::move(decoder_layer)),
        num_decoder_layers_(num_decoder_layers) {}
  /// The family.
  TORCH_ARG(std::string, model_type);
  /// The encoder's layer options (batch first).
  TORCH_ARG(TransformerLayerOptions, encoder_layer);
  /// Encoder layers.
  TORCH_ARG(int64_t, num_encoder_layers);
  /// The decoder's layer options (batch first).
  TORCH_ARG(TransformerLayerOptions, decoder_layer);
  /// Decoder layers.
  TORCH_ARG(int64_t, num_decoder_layers);
  /// Token vocabulary size.
  TORCH_ARG(int64_t, vocab_size) = 50265;
  /// Positions a sequence may have.
  TORCH_ARG(int64_t, max_position_embeddings) = 1024;
  /// Marian's sinusoidal positions (computed, not stored) instead of BART's
  /// learned ones, which start at row 2.
  TORCH_ARG(bool, sinusoidal_positions) = false;
  /// Token embeddings times sqrt(d_model).
  TORCH_ARG(bool, scale_embedding) = false;
  /// A LayerNorm after each stack's embeddings (bart, mbart).
  TORCH_ARG(bool, layernorm_embedding) = true;
  /// A final LayerNorm on each stack (mbart).
  TORCH_ARG(bool, final_norms) = false;
  /// One token embedding matrix for the encoder, the decoder and the LM
  /// head; false: each its own, as transformers 5.23 loads a checkpoint whose
  /// config says `tie_word_embeddings: false` (it then ties nothing).
  TORCH_ARG(bool, tie_word_embeddings) = true;
};

/// A sequence-to-sequence LM (transformers' `BartForConditionalGeneration`,
/// `MBartForConditionalGeneration`, `MarianMTModel`): the shared token
/// embeddings, each stack's positions and embedding norm, a
/// `mha::Transformer` (`transformer.encoder.*`, `transformer.decoder.*`),
/// the LM head and `final_logits_bias`.
class Seq2SeqLMImpl : public detail::WholeModel<Seq2SeqLMImpl> {
 public:
  /// Builds the submodules (random weights; `load_hf_model` loads a checkpoint's).
  explicit Seq2SeqLMImpl(Seq2SeqLMOptions options_) : options(std::move(options_)) { reset(); }

  /// The encoder's output, the decoder's memory: `input_ids` (N, S),
  /// `attention_mask` (N, S) 1 for tokens, 0 for padding (undefined: none).
  /// Returns (N, S, E).
  torch::Tensor encode(const torch::Tensor& input_ids,
                       const torch::Tensor& attention_mask = {}) const;

  /// Teacher-forced logits, transformers' `model(input_ids, attention_mask,
  /// decoder_input_ids).logits`: (N, T, vocab_size).
  torch::Tensor forward(const torch::Tensor& input_ids,
                        const torch::Tensor& attention_mask,
                        const torch::Tensor& decoder_input_ids);

  /// An empty decoder cache for `decode_cached` (`max_len > 0` fixes its capacity).
  TransformerDecoderCache make_cache(int64_t max_len = 0) const;

  /// One decoder step (or a prompt) through `cache`: `decoder_input_ids`
  /// (N, t), the positions after the `cache.length()` decoded ones;
  /// `memory` from `encode`, required on the first call; `attention_mask`
  /// the source's padding as given to `encode`. Returns the new positions'
  /// logits (N, t, vocab_size), within float32 rounding of `forward`'s.
  torch::Tensor decode_cached(const torch::Tensor& decoder_input_ids,
                              const torch::Tensor& memory,
                              TransformerDecoderCache& cache,
                              const torch::Tensor& attention_mask = {});

  /// The decoder's paged caches (its layers' self-attention pools over one
  /// block table), for `forward_paged`.
  PagedStackCache make_paged_cache(const PagedKVCacheOptions& options) const;
  /// The decoder's memory caches (its layers' cross-attention pools over
  /// another block table), for `forward_paged`. Add, fork and release each
  /// sequence in both caches, so that its id is the same in both.
  PagedStackCache make_paged_memory_cache(const PagedKVCacheOptions& options) const;

  /// Several decoder sequences at once, each without padding:
  /// `decoder_input_ids` (T) their new tokens as rows, sequence i's at
  /// [cu_seqlens[i], cu_seqlens[i + 1]), at the positions after its cached
  /// ones; `memory` (S_total, E) the encoder outputs (`encode`'s rows, the
  /// source's padding left out) of the sequences whose memory `memory_cache`
  /// does not hold yet, sequence i's at [cu_seqlens_memory[i],
  /// cu_seqlens_memory[i + 1]), or undefined. Returns (T, vocab_size): each
  /// sequence's rows equal its `decode_cached` alone within float32 rounding;
  /// with `last_rows_only`, (num_sequences, vocab_size), the logits of each
  /// sequence's last row. All or nothing: every layer's calls are checked
  /// before any cache changes.
  torch::Tensor forward_paged(const torch::Tensor& decoder_input_ids,
                              const torch::Tensor& memory,
                              PagedStackCache& self_cache,
                              PagedStackCache& memory_cache,
                              const std::vector<int64_t>& seq_ids,
                              const torch::Tensor& cu_seqlens,
                              const torch::Tensor& cu_seqlens_memory = {},
                              bool last_rows_only = false);

  /// The decoder's hidden states (..., E) -> logits (..., vocab_size).
  torch::Tensor logits(const torch::Tensor& hidden) const;

  /// The decoder stack's input for `decoder_input_ids` (N, t) at positions
  /// [start, start + t): token and position embeddings (and the embedding
  /// norm), (N, t, E).
  torch::Tensor embed_decoder(const torch::Tensor& decoder_input_ids, int64_t start) const;

  /// Registers the submodules and ties the head.
  void reset() override;
  /// Prints `mha::Seq2SeqLM(model_type=marian, ...)`.
  void pretty_print(std::ostream& stream) const override;

  /// The options this module was constructed with.
  Seq2SeqLMOptions options;
  /// The encoder's token embeddings, (vocab_size, E); the decoder's and the
  /// LM head's too where `tie_word_embeddings`.
  torch::nn::Embedding shared{nullptr};
  /// The decoder's own token embeddings (vocab_size, E) where
  /// `tie_word_embeddings` is false; null where tied.
  torch::nn::Embedding decoder_embed_tokens{nullptr};
  /// The encoder's and the decoder's position tables: (max_position_embeddings
  /// + 2, E) learned (bart, mbart), or (max_position_embeddings, E) sinusoids (marian).
  torch::nn::Embedding encoder_positions{nullptr};
  /// See `encoder_positions`.
  torch::nn::Embedding decoder_positions{nullptr};
  /// The embeddings' LayerNorms (bart, mbart), or empty.
  LayerNorm encoder_layernorm_embedding{nullptr};
  /// See `encoder_layernorm_embedding`.
  LayerNorm decoder_layernorm_embedding{nullptr};
  /// The encoder and decoder stacks.
  Transformer transformer{nullptr};
  /// E -> vocab_size, no bias; its weight `shared`'s where tied.
  torch::nn::Linear lm_head{nullptr};
  /// (1, vocab_size), added to the logits.
  torch::Tensor final_logits_bias;

 private:
  /// Token embeddings from `tokens` and position embeddings from `table` of
  /// `ids` (N, L) at `position_ids` (L), then `norm`: (N, L, E).
  torch::Tensor embed(const torch::Tensor& ids,
                      const torch::Tensor& position_ids,
                      const torch::nn::Embedding& tokens,
                      const torch::nn::Embedding& table,
                      const LayerNorm& norm) const;
  void tie_weights() override;
};

/// A `ModuleHolder` for `Seq2SeqLMImpl`.
TORCH_MODULE(Seq2SeqLM);

/// Options of `mha::CausalLM` (transformers' GPT-2 and OPT config fields).
struct CausalLMOptions {
  /// `model_type` ("gpt2", "opt"), the layers' options and their number.
  CausalLMOptions(std::string model_type, TransformerLayerOptions layer, int64_t num_layers)
      : model_type_(std::move(model_type)), layer_(std::move(layer)), num_layers_(num_layers) {}
  /// The family: the default positions (gpt2: 0.. whatever the padding;
  /// opt: counted over the attention mask).
  TORCH_ARG(std::string, model_type);
  /// One layer's options (batch first; pre-norm for gpt2 and most opt).
  TORCH_ARG(TransformerLayerOptions, layer);
  /// Number of layers.
  TORCH_ARG(int64_t, num_layers);
  /// Token vocabulary size.
  TORCH_ARG(int64_t, vocab_size) = 50257;
  /// Positions a sequence may have.
  TORCH_ARG(int64_t, max_position_embeddings) = 1024;
  /// Rows of the position table before position 0 (opt: 2).
  TORCH_ARG(int64_t, position_offset) = 0;
  /// The token embeddings' width; 0 means the layers' width. OPT-350m's is
  /// smaller (then `project_in` and `project_out` map between the two).
  TORCH_ARG(int64_t, word_embed_proj_dim) = 0;
  /// A final LayerNorm on the stack (gpt2's `ln_f`; opt's unless post-norm).
  TORCH_ARG(bool, final_norm) = true;
  /// The LM head is the token embedding matrix.
  TORCH_ARG(bool, tie_word_embeddings) = true;
};

/// A decoder-only LM (transformers' `GPT2LMHeadModel`, `OPTForCausalLM`):
/// token and position embeddings, the causal layers as a
/// `TransformerEncoder` (`decoder.layers.*`, the final norm as its `norm`),
/// OPT's projections, and the LM head.
///
/// Left-padded batches: pass the `attention_mask` (0 on padding); the
/// padding is masked as keys in every layer, in `forward`, `forward_cached`
/// and each step after. Logits at padded positions are not meaningful.
class CausalLMImpl : public detail::WholeModel<CausalLMImpl> {
 public:
  /// Builds the submodules (random weights; `load_hf_model` loads a checkpoint's).
  explicit CausalLMImpl(CausalLMOptions options_) : options(std::move(options_)) { reset(); }

  /// transformers' `model(input_ids, attention_mask, position_ids).logits`:
  /// `input_ids` (N, L), `attention_mask` (N, L) 1 for tokens and 0 for
  /// padding (undefined: none), `position_ids` (N, L) (undefined: the
  /// family's default, `default_position_ids`). Returns (N, L, vocab_size).
  torch::Tensor forward(const torch::Tensor& input_ids,
                        const torch::Tensor& attention_mask = {},
                        const torch::Tensor& position_ids = {});

  /// The LM head's input (transformers' `last_hidden_state`, after the final
  /// norm and `project_out`): (N, L, word_embed_proj_dim or E).
  torch::Tensor hidden_states(const torch::Tensor& input_ids,
                              const torch::Tensor& attention_mask = {},
                              const torch::Tensor& position_ids = {});

  /// The positions transformers' forward computes when none are given, for
  /// the `length` positions after `past` cached ones: gpt2 past..past+length-1
  /// whatever the padding; opt the count of tokens before each position in
  /// `attention_mask` (N, past + length), padding at 1 (then the offset).
  /// Returns (N, length) int64.
  torch::Tensor default_position_ids(const torch::Tensor& attention_mask,
                                     int64_t batch,
                                     int64_t past,
                                     int64_t length) const;

  /// The decoder stack's cache for `forward_cached` (`max_len > 0` fixes the capacity).
  TransformerEncoderCache make_cache(int64_t max_len = 0) const;

  /// A prompt, then one position per step, through `cache`: `input_ids`
  /// (N, t) after the cached positions; `attention_mask` (N, past + t)
  /// covers the cached and new positions; `position_ids` (N, t) (undefined:
  /// the family's default). Returns the new positions' logits (N, t,
  /// vocab_size), within float32 rounding of `forward` on the whole prefix.
  torch::Tensor forward_cached(const torch::Tensor& input_ids,
                               TransformerEncoderCache& cache,
                               const torch::Tensor& attention_mask = {},
                               const torch::Tensor& position_ids = {});

  /// The decoder stack's paged caches over one block table.
  PagedStackCache make_paged_cache(const PagedKVCacheOptions& options) const;

  /// Several sequences at once, each without padding: `input_ids` (T) their
  /// new tokens as rows, sequence i's at [cu_seqlens[i], cu_seqlens[i + 1]),
  /// at positions after each one's cached ones (`position_ids` (T) to give
  /// others). Returns (T, vocab_size): each sequence's rows equal its
  /// `forward_cached` alone within float32 rounding; with `last_rows_only`,
  /// (num_sequences, vocab_size), the logits of each sequence's last row
  /// (what a decoding step samples from: the head runs on those rows only).
  torch::Tensor forward_paged(const torch::Tensor& input_ids,
                              PagedStackCache& cache,
                              const std::vector<int64_t>& seq_ids,
                              const torch::Tensor& cu_seqlens,
                              const torch::Tensor& position_ids = {},
                              bool last_rows_only = false);

  /// Hidden states (..., word_embed_proj_dim or E) -> logits (..., vocab_size).
  torch::Tensor logits(const torch::Tensor& hidden) const;

  /// The decoder stack's input: token embeddings (projected in) plus the
  /// positions' (offset added): `input_ids` and `position_ids` (N, L) -> (N, L, E).
  torch::Tensor embed(const torch::Tensor& input_ids, const torch::Tensor& position_ids) const;
  /// The stack's output (..., E) projected out: the LM head's input.
  torch::Tensor project(const torch::Tensor& hidden) const;

  /// Registers the submodules and ties the head.
  void reset() override;
  /// Prints `mha::CausalLM(model_type=gpt2, num_layers=12)`.
  void pretty_print(std::ostream& stream) const override;

  /// The options this module was constructed with.
  CausalLMOptions options;
  /// (vocab_size, word_embed_proj_dim or E).
  torch::nn::Embedding embed_tokens{nullptr};
  /// (max_position_embeddings + position_offset, E).
  torch::nn::Embedding embed_positions{nullptr};
  /// OPT's word_embed_proj_dim -> E projection, or empty.
  torch::nn::Linear project_in{nullptr};
  /// The causal layers and the final norm.
  TransformerEncoder decoder{nullptr};
  /// OPT's E -> word_embed_proj_dim projection, or empty.
  torch::nn::Linear project_out{nullptr};
  /// -> vocab_size, no bias; its weight tied to `embed_tokens`'.
  torch::nn::Linear lm_head{nullptr};

 private:
  void tie_weights() override;
};

/// A `ModuleHolder` for `CausalLMImpl`.
TORCH_MODULE(CausalLM);

}  // namespace mha
