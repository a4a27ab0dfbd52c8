#pragma once

// transformers' `generate` for mha's whole language models (`Seq2SeqLM`,
// `CausalLM`), token for token from the same `GenerationConfig`
// (mha/generation_config.h): greedy decoding with transformers' logits
// processors, in transformers' order. Beam search and sampling are not
// implemented yet: a config that asks for them is refused, naming the field.

#include <mha/generation_config.h>
#include <mha/hf_language_models.h>
#include <torch/types.h>

namespace mha {

/// transformers' `model.generate(input_ids, attention_mask=attention_mask,
/// generation_config=config)` for a sequence-to-sequence LM: `input_ids`
/// (N, S) the sources, `attention_mask` (N, S) 1 for tokens and 0 for
/// padding (undefined: none). Returns (N, T) int64: the decoder start token,
/// then the generated tokens; a sequence that ended continues with
/// `pad_token_id` until the last one ends or `max_length` is reached, as
/// transformers returns them. Runs under `torch::NoGradGuard`, in eval mode.
torch::Tensor generate(Seq2SeqLM& model,
                       const torch::Tensor& input_ids,
                       const torch::Tensor& attention_mask,
                       const GenerationConfig& config);

/// transformers' `generate` for a decoder-only LM: `input_ids` (N, L)
/// left-padded prompts, `attention_mask` (N, L) 1 for tokens and 0 for the
/// padding (undefined: none), positions counted over the mask as
/// transformers' `generate` counts them. Returns (N, L + T) int64: the
/// prompts, then the generated tokens (finished sequences padded as above).
torch::Tensor generate(CausalLM& model,
                       const torch::Tensor& input_ids,
                       const torch::Tensor& attention_mask,
                       const GenerationConfig& config);

}  // namespace mha
