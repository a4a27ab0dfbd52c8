// transformers' stopping criteria, each as its `__call__` computes it
// (transformers/generation/stopping_criteria.py), and the list `generate`
// builds from a config (transformers/generation/utils.py,
// `_get_stopping_criteria` and `_merge_criteria_processor_list`).

#include "mha/stopping_criteria.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "generation/generation_plan.h"

namespace mha {

using torch::Tensor;

MaxLengthCriteria::MaxLengthCriteria(int64_t max_length) : max_length_(max_length) {}

Tensor MaxLengthCriteria::operator()(const Tensor& input_ids, const Tensor& /*scores*/) const {
  return at::full({input_ids.size(0)}, input_ids.size(1) >= max_length_, at::kBool);  // (rows)
}

EosTokenCriteria::EosTokenCriteria(std::vector<int64_t> eos_token_id)
    : eos_(at::tensor(eos_token_id, at::kLong)) {}

Tensor EosTokenCriteria::operator()(const Tensor& input_ids, const Tensor& /*scores*/) const {
  return at::isin(input_ids.select(1, input_ids.size(1) - 1), eos_);  // (rows)
}

namespace detail {

void add_stopping_criteria(const GenerationConfig& config,
                           const std::optional<Tokenizer>& tokenizer,
                           const StoppingCriteriaList& extra,
                           GenerationPlan& plan) {
  // transformers' _get_stopping_criteria: the maximum length, the stop strings, the end tokens.
  StoppingCriteriaList defaults{std::make_shared<MaxLengthCriteria>(plan.max_length)};
  if (!config.stop_strings().empty()) {
    TORCH_CHECK_VALUE(tokenizer.has_value(),
                      "There are one or more stop strings, either in the arguments to `generate` "
                      "or in the model's generation config, but we could not locate a tokenizer. "
                      "When generating with stop strings, you must pass the model's tokenizer "
                      "(mha::load_hf_tokenizer) to `generate` after the stopping criteria");
    defaults.push_back(std::make_shared<StopStringCriteria>(*tokenizer, config.stop_strings()));
  }
  if (!plan.eos.empty()) defaults.push_back(std::make_shared<EosTokenCriteria>(plan.eos));
  plan.stopping = merged_by_class(defaults, extra, "stopping criterion");
  plan.pads_finished = std::any_of(plan.stopping.begin(), plan.stopping.end(), [](const auto& c) {
    return dynamic_cast<const EosTokenCriteria*>(c.get()) != nullptr;
  });
  TORCH_CHECK_VALUE(!plan.pads_finished || plan.pad.has_value(),
                    "generate: an EosTokenCriteria continues finished sequences with the pad "
                    "token, but the config has no `pad_token_id` or `eos_token_id`");
}

Tensor stops(const GenerationPlan& plan, const Tensor& sequences) {
  Tensor done = at::zeros({sequences.size(0)}, at::kBool);  // (rows)
  for (const auto& criteria : plan.stopping) done = done | (*criteria)(sequences, Tensor());
  return done;
}

}  // namespace detail
}  // namespace mha
