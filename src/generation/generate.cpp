// mha::generate: transformers' `generate` (transformers/generation/utils.py)
// over the whole language models' cached steps: the inputs repeated for
// beams or several sequences (`_expand_inputs_for_generation`), then the
// loop without beams (generation/sample.cpp) or beam search
// (generation/beam_search.cpp).

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <algorithm>
#include <type_traits>

#include "common/shape_format.h"
#include "generation/decoding.h"
#include "generation/generation_plan.h"
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

/// generate decodes on the CPU: `model`'s parameters and `input_ids` there.
void check_on_cpu(const torch::nn::Module& model, const Tensor& input_ids) {
  const auto parameters = model.parameters();
  const torch::Device device = parameters.empty() ? torch::kCPU : parameters.front().device();
  TORCH_CHECK_VALUE(device.is_cpu() && input_ids.device().is_cpu(),
                    fmt::format("generate: decodes on the CPU, but the model is on {} and "
                                "input_ids on {} (move both with .to(torch::kCPU))",
                                device.str(), input_ids.device().str()));
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
  check_on_cpu(*model, input_ids);
  const auto& o = model->options;
  return detail::plan_generation(config, input_length, o.vocab_size(), o.max_position_embeddings(),
                                 /*encoder_decoder=*/std::is_same_v<Model, Seq2SeqLM>);
}

/// transformers' `expand_size`: the rows each input becomes.
int64_t rows_per_input(const GenerationConfig& config) {
  return std::max(config.num_beams(), config.num_return_sequences());
}

/// `tensor` (N, ...) with each row repeated `times` times (undefined stays so).
Tensor repeat_rows(const Tensor& tensor, int64_t times) {
  return tensor.defined() && times > 1 ? tensor.repeat_interleave(times, 0) : tensor;
}

/// The rows of a first step: each input's `rows` rows (R > 1) hold the same
/// tokens until the first is chosen, so the first step runs on one row per
/// input (`first`, N), and `each` (N R) gives every row its input's result.
struct FirstStepRows {
  Tensor first, each;
  FirstStepRows(int64_t inputs, int64_t rows)
      : first(at::arange(0, inputs * rows, rows, at::kLong)),
        each(at::arange(inputs, at::kLong).repeat_interleave(rows)) {}
};

/// `t` as an ordinary tensor (a copy made outside InferenceMode); undefined stays so.
Tensor ordinary(const Tensor& t) { return t.defined() ? t.clone() : t; }

/// Beam search with beams, else greedy decoding or sampling, in
/// InferenceMode (no autograd bookkeeping on the loop's ~1,000 ops a step);
/// what it returns is copied out as ordinary tensors.
GenerateOutput decode(const detail::GenerateCall& call,
                      detail::GenerationPlan plan,
                      const Tensor& input_ids,
                      const detail::DecodingSteps& steps) {
  detail::add_logits_processors(call.config, call.logits_processor, plan);
  detail::add_stopping_criteria(call.config, call.tokenizer, call.stopping_criteria, plan);
  detail::Decoded decoded;
  {
    const c10::InferenceMode inference;
    const auto search = detail::make_search(call.config, plan, input_ids, call.generator);
    decoded = detail::run_search(*search, steps);
  }
  return {ordinary(decoded.sequences), ordinary(decoded.sequences_scores)};
}

}  // namespace

GenerateOutput detail::generate_for(Seq2SeqLM& model, const GenerateCall& call) {
  const detail::GenerationPlan plan =
      checked_plan(model, call.input_ids, call.attention_mask, call.config, /*input_length=*/1);
  torch::NoGradGuard no_grad;
  const int64_t rows = rows_per_input(call.config);
  const Tensor source_mask = call.attention_mask.defined() ? call.attention_mask.to(at::kLong)
                                                           : call.attention_mask;  // (N, S)
  const Tensor memory = model->encode(call.input_ids, source_mask);                // (N, S, E)
  const Tensor mask = repeat_rows(source_mask, rows);                              // (N R, S)
  const FirstStepRows first(call.input_ids.size(0), rows);
  TransformerDecoderCache cache = model->make_cache();
  detail::DecodingSteps steps;
  steps.next_logits = [&](const Tensor& sequences) {
    const Tensor last = sequences.narrow(1, sequences.size(1) - 1, 1);  // (N R, 1)
    if (cache.length() > 0 || rows == 1) {
      const Tensor step_memory = cache.length() == 0 ? memory : Tensor();
      return model->decode_cached(last, step_memory, cache, mask).select(1, 0);  // (N R, V)
    }
    // One row per input projects its memory once; the reorder copies the
    // self-attention's first keys and lets every row read its input's memory.
    const Tensor logits =
        model->decode_cached(last.index_select(0, first.first), memory, cache, source_mask);
    cache.reorder(first.each);
    return logits.select(1, 0).index_select(0, first.each);  // (N, V) -> (N R, V)
  };
  // Beams move within their source's rows, whose projected memories are the same.
  steps.reorder = [&](const Tensor& index) { cache.reorder_decoded(index); };
  const Tensor start = at::full({memory.size(0) * rows, 1}, *plan.start, at::kLong);  // (N R, 1)
  return decode(call, plan, start, steps);
}

GenerateOutput detail::generate_for(CausalLM& model, const GenerateCall& call) {
  detail::GenerationPlan plan =
      checked_plan(model, call.input_ids, call.attention_mask, call.config, call.input_ids.size(1));
  torch::NoGradGuard no_grad;
  const int64_t rows = rows_per_input(call.config);
  const Tensor prompts = repeat_rows(call.input_ids, rows);  // (N R, L)
  Tensor mask = repeat_rows(call.attention_mask.defined() ? call.attention_mask.to(at::kLong)
                                                          : at::ones_like(call.input_ids),
                            rows);
  if (call.attention_mask.defined()) {  // the prompts' left padding: (N R)
    plan.prompt_padding = mask.ne(0).to(at::kInt).argmax(1);
  }
  TransformerEncoderCache cache = model->make_cache();
  const FirstStepRows first(call.input_ids.size(0), rows);
  int64_t fed = 0;  // tokens already in the cache
  detail::DecodingSteps steps;
  steps.next_logits = [&](const Tensor& sequences) {
    const int64_t length = sequences.size(1);
    if (length > mask.size(1)) {  // the new token is attended
      mask = at::cat({mask, at::ones({mask.size(0), length - mask.size(1)}, at::kLong)}, 1);
    }
    const Tensor ids = sequences.narrow(1, fed, length - fed);                 // (N R, t)
    const Tensor positions = positions_of(mask).narrow(1, fed, length - fed);  // (N R, t)
    if (fed > 0 || rows == 1) {
      const Tensor logits = model->forward_cached(ids, cache, mask, positions);  // (N R, t, V)
      fed = length;
      return logits.select(1, logits.size(1) - 1);  // (N R, V)
    }
    // The prompt once per input; the reorder copies its keys to every row.
    const auto once = [&](const Tensor& t) { return t.index_select(0, first.first); };
    const Tensor logits = model->forward_cached(once(ids), cache, once(mask), once(positions));
    cache.reorder(first.each);
    fed = length;
    return logits.select(1, logits.size(1) - 1).index_select(0, first.each);  // (N R, V)
  };
  steps.reorder = [&](const Tensor& index) { cache.reorder(index); };
  return decode(call, plan, prompts, steps);
}

}  // namespace mha
