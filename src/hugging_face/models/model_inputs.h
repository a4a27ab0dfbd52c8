#pragma once

// Private: what the whole models share: checks of token ids and positions,
// the masks made from transformers' attention_mask, and tied weights.

#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "mha/convertible_module.h"
#include "mha/paged_sequences.h"

namespace mha {

struct EncoderModelOutput;

namespace detail {

/// Throws `c10::Error` unless `ids` is an integer tensor of `dims` dimensions
/// with every id in [0, vocab_size): the message names `name`, the first id
/// outside and the size (never an out-of-bounds read).
void check_token_ids(const torch::Tensor& ids,
                     int64_t vocab_size,
                     const std::string& name,
                     int64_t dims = 2);

/// Throws `c10::Error` unless every row of `positions` is in [0, rows): the
/// message names the positions asked for and `max_position_embeddings`.
void check_positions(const torch::Tensor& positions, int64_t rows, int64_t offset = 0);

/// The positions of a paged step's rows (`forward_paged`): sequence i's rows,
/// [cu_seqlens[i], cu_seqlens[i + 1]), continue from the `cache.length`
/// positions it holds. Returns (T) int64.
torch::Tensor paged_positions(const PagedSequences& cache,
                              const std::vector<int64_t>& seq_ids,
                              const torch::Tensor& cu_seqlens);

/// Where each sequence's last row is among a paged step's rows (`cu_seqlens`
/// (P + 1)), checked that every sequence has one: (P) int64, the rows a
/// decoding step samples from.
torch::Tensor last_row_indices(const torch::Tensor& cu_seqlens);

/// Throws `c10::Error` unless `mask` is undefined or (N, length) as `ids` needs.
void check_attention_mask(const torch::Tensor& mask, int64_t batch, int64_t length);

/// transformers' attention_mask (1 = attend, 0 = padding) as mha's key padding
/// mask (true = masked); undefined stays undefined.
torch::Tensor key_padding_mask(const torch::Tensor& attention_mask);

/// Whether `attention_mask` is defined and has a 0 (a padded batch).
bool has_padding(const torch::Tensor& attention_mask);

/// The causal mask of a padded batch for `num_heads` heads: (N * num_heads,
/// L, L), 0 where query i may see key j (j <= i and j not padding, or j == i)
/// and -inf elsewhere, of `dtype`. A padded query sees itself, so no row is
/// fully masked (no NaN reaches the later layers through it).
torch::Tensor padded_causal_mask(const torch::Tensor& attention_mask,
                                 int64_t num_heads,
                                 torch::Dtype dtype);

/// An encoder model's output: `hidden` (N, L, E) and, where the model has a
/// pooler (BERT's and ViT's), tanh(pooler(first token)), (N, out).
EncoderModelOutput encoder_model_output(const torch::Tensor& hidden,
                                        const torch::nn::Linear& pooler);

/// A whole model's `pretty_print`: `name(model_type=..., num_layers=...)`.
void print_model(std::ostream& stream,
                 const char* name,
                 const std::string& model_type,
                 int64_t num_layers);

/// Registers a model's bias-free LM head `lm_head` (`in` -> `vocab_size`).
torch::nn::Linear register_lm_head(torch::nn::Module& model, int64_t in, int64_t vocab_size);

/// Where `tie_word_embeddings`, ties `head`'s weight to `embeddings`: the same
/// values in memory (a second tensor over their storage), as transformers ties
/// an LM head to its input embeddings. Leaves the head alone when its weight
/// is a converted weight's placeholder (`mha::prepack`,
/// `mha::quantize_dynamic`: the head then holds its own form).
void tie_lm_head(bool tie_word_embeddings,
                 torch::nn::LinearImpl& head,
                 const torch::Tensor& embeddings);

/// `Module::to` of `module` (the arguments given), its prepacked weights (as
/// `load_hf_model` leaves them) unpacked first (`mha::unpack`) when the
/// conversion leaves float32 on the CPU, which they cannot.
void to_unpacking(torch::nn::Module& module,
                  std::optional<torch::Device> device,
                  std::optional<torch::Dtype> dtype,
                  bool non_blocking);

/// `WholeModel`'s `to` overloads (`to_unpacking`, then the tie made again), for
/// the model class that instantiates it (`template class detail::WholeModel<Impl>;`).
template <typename Derived>
void WholeModel<Derived>::to(torch::Device device, torch::Dtype dtype, bool non_blocking) {
  to_unpacking(*this, device, dtype, non_blocking);
  this->tie_weights();
}

/// See the overload above.
template <typename Derived>
void WholeModel<Derived>::to(torch::Dtype dtype, bool non_blocking) {
  to_unpacking(*this, std::nullopt, dtype, non_blocking);
  this->tie_weights();
}

/// See the overload above.
template <typename Derived>
void WholeModel<Derived>::to(torch::Device device, bool non_blocking) {
  to_unpacking(*this, device, std::nullopt, non_blocking);
  this->tie_weights();
}

}  // namespace detail
}  // namespace mha
