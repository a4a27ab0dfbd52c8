// The two served language models: a decoder-only `CausalLM` over a
// `ContinuousBatch` of its causal stack, and a `Seq2SeqLM` over one of its
// `Transformer`'s decoder (each request's source encoded alone at admission).

#include "generation/served_model.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/nn/utils.h>

#include <type_traits>

#include "common/shape_format.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

/// `input_ids` (L) int64, L > 0, every id within `vocab_size`.
void check_request_tokens(const Tensor& input_ids, int64_t vocab_size) {
  TORCH_CHECK_VALUE(input_ids.defined() && input_ids.dim() == 1 && input_ids.size(0) > 0,
                    fmt::format("GenerationServer: expected input_ids of shape (length), length "
                                "positive, but got {}",
                                input_ids.defined() ? torch_size(input_ids.sizes()) : "undefined"));
  TORCH_CHECK_TYPE(input_ids.scalar_type() == at::kLong,
                   "GenerationServer: expected input_ids of dtype int64, but got ",
                   c10::toString(input_ids.scalar_type()));
  const int64_t low = input_ids.min().item<int64_t>(), high = input_ids.max().item<int64_t>();
  TORCH_CHECK_VALUE(low >= 0 && high < vocab_size,
                    fmt::format("GenerationServer: input_ids holds token {}, outside the model's "
                                "vocabulary of {} tokens",
                                low < 0 ? low : high, vocab_size));
}

/// A request's lengths within the model's `positions`.
void check_within_positions(const char* what, int64_t length, int64_t positions) {
  TORCH_CHECK_VALUE(length <= positions,
                    fmt::format("GenerationServer: {} of {} tokens, but the model has {} "
                                "positions (lower max_new_tokens or max_length)",
                                what, length, positions));
}

/// The plan of `config` for a request `input_ids` (L) of a model of options
/// `o` (a decoder-only model's prompt, or a `seq2seq` model's source), its
/// tokens and lengths checked.
template <typename Options>
GenerationPlan checked_plan(const Options& o,
                            const GenerationConfig& config,
                            const Tensor& input_ids,
                            bool seq2seq) {
  check_request_tokens(input_ids, o.vocab_size());
  if (seq2seq) check_within_positions("a source", input_ids.size(0), o.max_position_embeddings());
  GenerationPlan plan = plan_generation(config, seq2seq ? 1 : input_ids.size(0), o.vocab_size(),
                                        o.max_position_embeddings(), seq2seq);
  check_within_positions(seq2seq ? "a decoded sequence" : "a sequence", plan.max_length,
                         o.max_position_embeddings());
  return plan;
}

/// `Model` (a `CausalLM` or a `Seq2SeqLM`) around a `ContinuousBatch` of its stack.
template <typename Model>
class ServedLM final : public ServedModel {
  static constexpr bool kSeq2Seq = std::is_same_v<Model, Seq2SeqLM>;

 public:
  explicit ServedLM(Model model) : model_(std::move(model)) {}

  std::unique_ptr<ContinuousBatch> make_batch(const ContinuousBatchOptions& options) override {
    if constexpr (kSeq2Seq) {
      return std::make_unique<ContinuousBatch>(model_->transformer, options);
    } else {
      return std::make_unique<ContinuousBatch>(model_->decoder, options);
    }
  }
  GenerationPlan plan(const GenerationConfig& config, const Tensor& input_ids) override {
    return checked_plan(model_->options, config, input_ids, kSeq2Seq);
  }
  Tensor first_tokens(const Tensor& input_ids, const GenerationPlan& plan) const override {
    if constexpr (kSeq2Seq) {
      return torch::full({1, 1}, *plan.start, torch::kLong);  // (1, 1): the decoder start
    } else {
      return input_ids.unsqueeze(0);  // (1, L): the prompt
    }
  }
  int64_t admit(ContinuousBatch& batch, const Tensor& input_ids) override {
    if constexpr (kSeq2Seq) {
      return batch.add(model_->encode(input_ids.unsqueeze(0)).squeeze(0));  // memory (S, E)
    } else {
      return batch.add();
    }
  }
  Tensor step(ContinuousBatch& batch,
              const Tensor& tokens,
              const std::vector<int64_t>& ids,
              const std::vector<int64_t>& lengths) override {
    const auto paged_call = [&](PagedStackCache& self, PagedStackCache* memory,
                                const Tensor& cu_seqlens) {
      if constexpr (kSeq2Seq) {  // the memories: admitted into `memory` already
        return model_->forward_paged(tokens, Tensor(), self, *memory, ids, cu_seqlens, Tensor(),
                                     /*last_rows_only=*/true);
      } else {
        return model_->forward_paged(tokens, self, ids, cu_seqlens, Tensor(),
                                     /*last_rows_only=*/true);
      }
    };
    return step_model(batch, ids, lengths, paged_call);  // (P, V)
  }

 private:
  Model model_;
};

/// The server decodes on the CPU: `model`'s parameters there.
void check_on_cpu(const torch::nn::Module& model) {
  for (const auto& p : model.parameters()) {
    TORCH_CHECK_VALUE(p.device().is_cpu(),
                      fmt::format("GenerationServer: serves on the CPU, but the model is on {} "
                                  "(move it with ->to(torch::kCPU))",
                                  p.device().str()));
  }
}

}  // namespace

std::unique_ptr<ServedModel> served(CausalLM model) {
  check_on_cpu(*model);
  return std::make_unique<ServedLM<CausalLM>>(std::move(model));
}

std::unique_ptr<ServedModel> served(Seq2SeqLM model) {
  check_on_cpu(*model);
  return std::make_unique<ServedLM<Seq2SeqLM>>(std::move(model));
}

}  // namespace detail
}  // namespace mha
