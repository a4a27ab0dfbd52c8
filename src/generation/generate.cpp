// mha::generate: transformers' `generate` without beams (transformers/
// generation/utils.py, `_sample`) over the whole language models' cached
// steps: the processed scores' argmax per row, or with `do_sample` one
// `multinomial` over every row's probabilities (finished rows included, as
// transformers draws); finished rows continued with the pad token, stopped
// at `max_length` or when every row has ended.

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <functional>
#include <type_traits>

#include "common/shape_format.h"
#include "generation/logits_processors.h"
#include "mha/generation.h"

namespace mha {

using torch::Tensor;

namespace {

/// `input_ids` (N, t) int64 with N, t > 0; `attention_mask` of its shape or undefined.
void check_inputs(const Tensor& input_ids, const Tensor& attention_mask) {
  TORCH_CHECK_VALUE(input_ids.defined(), "generate: expected input_ids to be a defined tensor");
  TORCH_CHECK_VALUE(input_ids.dim() == 2 && input_ids.size(0) > 0 && input_ids.size(1) > 0,
                    fmt::format("generate: expected input_ids of shape (batch, length), both "
                                "positive, but got {}",
                                detail::torch_size(input_ids.sizes())));
  TORCH_CHECK_TYPE(input_ids.scalar_type() == at::kLong,
                   "generate: expected input_ids of dtype int64, but got ",
                   c10::toString(input_ids.scalar_type()));
  TORCH_CHECK_VALUE(!attention_mask.defined() || attention_mask.sizes() == input_ids.sizes(),
                    fmt::format("generate: expected attention_mask of input_ids' shape {}, but got "
                                "{}",
                                detail::torch_size(input_ids.sizes()),
                                detail::torch_size(attention_mask.sizes())));
}

/// The decoding loop from `sequences` (N, t0): `next_logits(sequences)` gives
/// the next position's logits (N, V) after each step's token is appended;
/// samples draw from `generator` (undefined: the default CPU generator).
Tensor decode(const GenerationConfig& config,
              const detail::GenerationPlan& plan,
              Tensor sequences,
              const std::optional<at::Generator>& generator,
              const std::function<Tensor(const Tensor&)>& next_logits) {
  const int64_t n = sequences.size(0);
  Tensor unfinished = at::ones({n}, at::kLong);        // (N)
  const Tensor eos = at::tensor(plan.eos, at::kLong);  // (K)
  while (true) {
    const Tensor logits = next_logits(sequences).to(at::kFloat);  // (N, V)
    const Tensor scores = detail::process_logits(config, plan, sequences, logits.clone());
    Tensor next =
        config.do_sample()  // (N)
            ? at::multinomial(scores.softmax(-1), 1, /*replacement=*/false, generator).squeeze(1)
            : scores.argmax(-1);
    if (!plan.eos.empty()) next = next * unfinished + *plan.pad * (1 - unfinished);
    sequences = at::cat({sequences, next.unsqueeze(1)}, 1);  // (N, t + 1)
    if (sequences.size(1) >= plan.max_length) break;         // MaxLengthCriteria
    if (!plan.eos.empty()) {                                 // EosTokenCriteria
      unfinished = unfinished * at::isin(next, eos).logical_not().to(at::kLong);
      if (unfinished.max().item<int64_t>() == 0) break;
    }
  }
  return sequences;
}

/// transformers' generate's positions for left-padded prompts: the count of
/// tokens before each position, 1 on the padding. `mask` (N, t) -> (N, t).
Tensor positions_of(const Tensor& mask) { return (mask.cumsum(-1) - 1).masked_fill_(mask == 0, 1); }

/// `input_ids` and `attention_mask` checked, then the plan of `config` for
/// `model` (a `Seq2SeqLM` or a `CausalLM`) over a decoder input of `input_length`.
template <typename Model>
detail::GenerationPlan checked_plan(const Model& model,
                                    const Tensor& input_ids,
                                    const Tensor& attention_mask,
                                    const GenerationConfig& config,
                                    int64_t input_length) {
  check_inputs(input_ids, attention_mask);
  const auto& o = model->options;
  return detail::plan_generation(config, input_length, o.vocab_size(), o.max_position_embeddings(),
                                 /*encoder_decoder=*/std::is_same_v<Model, Seq2SeqLM>);
}

}  // namespace

Tensor generate(Seq2SeqLM& model,
                const Tensor& input_ids,
                const Tensor& attention_mask,
                const GenerationConfig& config,
                const std::optional<at::Generator>& generator) {
  const detail::GenerationPlan plan =
      checked_plan(model, input_ids, attention_mask, config, /*input_length=*/1);
  torch::NoGradGuard no_grad;
  const Tensor mask = attention_mask.defined() ? attention_mask.to(at::kLong) : attention_mask;
  const Tensor memory = model->encode(input_ids, mask);  // (N, S, E)
  TransformerDecoderCache cache = model->make_cache();
  const Tensor start = at::full({input_ids.size(0), 1}, *plan.start, at::kLong);  // (N, 1)
  return decode(config, plan, start, generator, [&](const Tensor& sequences) {
    const Tensor last = sequences.narrow(1, sequences.size(1) - 1, 1);  // (N, 1)
    const Tensor step_memory = cache.length() == 0 ? memory : Tensor();
    return model->decode_cached(last, step_memory, cache, mask).select(1, 0);  // (N, V)
  });
}

Tensor generate(CausalLM& model,
                const Tensor& input_ids,
                const Tensor& attention_mask,
                const GenerationConfig& config,
                const std::optional<at::Generator>& generator) {
  detail::GenerationPlan plan =
      checked_plan(model, input_ids, attention_mask, config, input_ids.size(1));
  if (attention_mask.defined()) {  // the prompts' left padding: (N)
    plan.prompt_padding = attention_mask.ne(0).to(at::kInt).argmax(1);
  }
  torch::NoGradGuard no_grad;
  Tensor mask =
      attention_mask.defined() ? attention_mask.to(at::kLong) : at::ones_like(input_ids);  // (N, L)
  TransformerEncoderCache cache = model->make_cache();
  int64_t fed = 0;  // tokens already in the cache
  return decode(config, plan, input_ids, generator, [&](const Tensor& sequences) {
    const int64_t length = sequences.size(1);
    if (length > mask.size(1)) {  // the new token is attended
      mask = at::cat({mask, at::ones({mask.size(0), length - mask.size(1)}, at::kLong)}, 1);
    }
    const Tensor ids = sequences.narrow(1, fed, length - fed);                 // (N, t)
    const Tensor positions = positions_of(mask).narrow(1, fed, length - fed);  // (N, t)
    const Tensor logits = model->forward_cached(ids, cache, mask, positions);  // (N, t, V)
    fed = length;
    return logits.select(1, logits.size(1) - 1);  // (N, V)
  });
}

}  // namespace mha
