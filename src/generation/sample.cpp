// transformers' decoding loop without beams (transformers/generation/utils.py,
// `_sample`): the processed scores' argmax per row, or with `do_sample` one
// `multinomial` over every row's probabilities (finished rows included, as
// transformers draws); finished rows continued with the pad token, stopped
// at `max_length` or when every row has ended.

#include <ATen/ATen.h>

#include <tuple>

#include "generation/decoding.h"

namespace mha {
namespace detail {

using torch::Tensor;

Tensor next_tokens(const GenerationConfig& config,
                   const GenerationPlan& plan,
                   const Tensor& sequences,
                   const Tensor& logits,
                   const std::optional<at::Generator>& generator) {
  const Tensor scores = process_logits(config, plan, sequences, logits.to(at::kFloat).clone());
  if (config.do_sample()) {  // (N)
    return at::multinomial(scores.softmax(-1), 1, /*replacement=*/false, generator).squeeze(1);
  }
  // transformers' argmax: the first maximal index of each row, which max(-1)
  // returns too, 3-7x faster than argmax's CPU kernel over a 32,000-token row.
  return std::get<1>(scores.max(-1));  // (N)
}

Decoded greedy_or_sample(const GenerationConfig& config,
                         const GenerationPlan& plan,
                         Tensor sequences,
                         const std::optional<at::Generator>& generator,
                         const DecodingSteps& steps) {
  const int64_t n = sequences.size(0);
  Tensor unfinished = at::ones({n}, at::kLong);        // (N)
  const Tensor eos = at::tensor(plan.eos, at::kLong);  // (K)
  while (true) {
    const Tensor logits = steps.next_logits(sequences);                     // (N, V)
    Tensor next = next_tokens(config, plan, sequences, logits, generator);  // (N)
    if (!plan.eos.empty()) next = next * unfinished + *plan.pad * (1 - unfinished);
    sequences = at::cat({sequences, next.unsqueeze(1)}, 1);  // (N, t + 1)
    if (sequences.size(1) >= plan.max_length) break;         // MaxLengthCriteria
    if (!plan.eos.empty()) {                                 // EosTokenCriteria
      unfinished = unfinished * at::isin(next, eos).logical_not().to(at::kLong);
      if (unfinished.max().item<int64_t>() == 0) break;
    }
  }
  return {sequences, Tensor()};
}

}  // namespace detail
}  // namespace mha
