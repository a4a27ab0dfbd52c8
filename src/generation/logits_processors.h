#pragma once

// Private: transformers' logits processors and sampling warpers
// (transformers/generation/logits_process.py), in the order `generate`
// applies them (`_get_logits_processor`), and the lengths and special tokens
// `generate` derives from a config (`_prepare_generated_length`,
// `_prepare_special_tokens`).

#include <mha/generation_config.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace mha {
namespace detail {

/// What one `generate` call runs with: the config's lengths made absolute and
/// its special tokens resolved, as transformers resolves them.
struct GenerationPlan {
  int64_t max_length = 0;          ///< total sequence length at which it stops
  int64_t min_length = 0;          ///< the end token is suppressed below this length
  int64_t input_length = 0;        ///< the decoder's input length (prompt, or 1)
  int64_t min_tokens_to_keep = 1;  ///< what top-k and top-p keep at least (beams: more)
  std::vector<int64_t> eos;        ///< end tokens (empty: none)
  std::optional<int64_t> pad;      ///< what finished sequences continue with
  std::optional<int64_t> start;    ///< the decoder start token (encoder-decoder)
  /// Each row's left padding (N) int64, which the repetition penalty skips
  /// (a decoder-only model's attention mask; undefined: none).
  torch::Tensor prompt_padding;
};

/// The plan of `config` for a decoder input of `input_length` tokens, a model
/// of `vocab_size` tokens and `max_positions` positions, `encoder_decoder`
/// or not. Throws for an invalid config and for token ids the model cannot
/// embed or score, naming the field.
GenerationPlan plan_generation(const GenerationConfig& config,
                               int64_t input_length,
                               int64_t vocab_size,
                               int64_t max_positions,
                               bool encoder_decoder);

/// `scores` (N, V) float32 of the next token after `sequences` (N, t), as
/// transformers' processors leave them: the repetition penalty, no repeated
/// n-gram, bad words, the
/// minimum lengths, forced first and last tokens, suppressed tokens, with
/// `do_sample` the warpers (temperature, top-k, top-p), and the log-softmax
/// of `renormalize_logits`. May write into `scores` (callers pass a tensor
/// of their own).
torch::Tensor process_logits(const GenerationConfig& config,
                             const GenerationPlan& plan,
                             const torch::Tensor& sequences,
                             torch::Tensor scores);

}  // namespace detail
}  // namespace mha
