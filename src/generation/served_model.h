#pragma once

// Private: what `GenerationServer` needs of a whole language model around a
// `ContinuousBatch` of its stack: admitting a request, and a step of the
// model's own paged call on the batch's caches.

#include <mha/batching.h>
#include <mha/hf_language_models.h>
#include <torch/types.h>

#include <memory>
#include <vector>

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
  /// The logits of each sequence's last new row, (P, V): `tokens` (T) the
  /// new tokens of `ids` (`lengths[i]` each, after the positions `batch`
  /// holds), through the model's own paged call on `batch`'s caches.
  virtual torch::Tensor step(ContinuousBatch& batch,
                             const torch::Tensor& tokens,
                             const std::vector<int64_t>& ids,
                             const std::vector<int64_t>& lengths) = 0;
};

/// `model` served (eval mode).
std::unique_ptr<ServedModel> served(CausalLM model);
/// See above.
std::unique_ptr<ServedModel> served(Seq2SeqLM model);

}  // namespace detail
}  // namespace mha
