#pragma once

// Private: what `GenerationServer` needs of a whole language model around a
// `ContinuousBatch` of its stack: admitting a request, the stack's input for
// new tokens, and the logits of the stack's output.

#include <mha/batching.h>
#include <mha/hf_language_models.h>
#include <torch/types.h>

#include <memory>

#include "generation/generation_plan.h"

namespace mha {
namespace detail {

/// A `CausalLM` or a `Seq2SeqLM` served over a `ContinuousBatch`.
class ServedModel {
 public:
  virtual ~ServedModel() = default;
  /// A batch over the model's stack.
  virtual std::unique_ptr<ContinuousBatch> make_batch(const ContinuousBatchOptions& options) = 0;
  /// The plan of `config` for `input_ids` (L), checked against the model's
  /// vocabulary and positions.
  virtual GenerationPlan plan(const GenerationConfig& config, const torch::Tensor& input_ids) = 0;
  /// The sequence generation starts from: the prompt or the decoder start, (1, t0).
  virtual torch::Tensor first_tokens(const torch::Tensor& input_ids,
                                     const GenerationPlan& plan) const = 0;
  /// Admits `input_ids` (L) into `batch` (a source is encoded first); its id there.
  virtual int64_t admit(ContinuousBatch& batch, const torch::Tensor& input_ids) = 0;
  /// The stack's input for `tokens` (t) at positions [start, start + t): (t, E).
  virtual torch::Tensor embed(const torch::Tensor& tokens, int64_t start) const = 0;
  /// The stack's outputs (R, E) -> logits (R, V).
  virtual torch::Tensor logits(const torch::Tensor& hidden) const = 0;
};

/// `model` served (eval mode).
std::unique_ptr<ServedModel> served(CausalLM model);
/// See above.
std::unique_ptr<ServedModel> served(Seq2SeqLM model);

}  // namespace detail
}  // namespace mha
