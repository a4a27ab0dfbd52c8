// transformers' `_prepare_generated_length` and `_prepare_special_tokens`
// (transformers/generation/utils.py) for one `generate` call, with the checks
// of the token ids a model cannot embed or score.

#include "generation/generation_plan.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace mha {
namespace detail {

namespace {

/// `field`'s token ids must index a vocabulary of `vocab_size`.
void check_in_vocabulary(const char* field,
                         const std::vector<int64_t>& tokens,
                         int64_t vocab_size) {
  for (const int64_t t : tokens) {
    TORCH_CHECK_VALUE(t >= 0 && t < vocab_size,
                      fmt::format("generate: `{}` holds token {}, outside the model's vocabulary "
                                  "of {} tokens",
                                  field, t, vocab_size));
  }
}
}  // namespace

GenerationPlan plan_generation(const GenerationConfig& config,
                               int64_t input_length,
                               int64_t vocab_size,
                               int64_t max_positions,
                               bool encoder_decoder) {
  config.validate();
  GenerationPlan plan;
  plan.input_length = input_length;
  if (config.max_new_tokens()) {
    plan.max_length = *config.max_new_tokens() + input_length;
  } else if (config.max_length()) {
    plan.max_length = *config.max_length();
  } else {  // transformers' default: 20 new tokens, within the positions
    plan.max_length = std::min<int64_t>(20 + input_length, max_positions);
  }
  plan.eos = config.eos_token_id();
  plan.pad = config.pad_token_id();
  if (!plan.pad && !plan.eos.empty()) plan.pad = plan.eos.front();
  if (config.num_beams() > 1) {  // beams keep one token besides the end tokens
    plan.min_tokens_to_keep = std::max<int64_t>(2, static_cast<int64_t>(plan.eos.size()) + 1);
  }
  if (encoder_decoder) {
    plan.start =
        config.decoder_start_token_id() ? config.decoder_start_token_id() : config.bos_token_id();
    TORCH_CHECK_VALUE(plan.start.has_value(),
                      "`decoder_start_token_id` or `bos_token_id` has to be defined for "
                      "encoder-decoder generation.");
    check_in_vocabulary("decoder_start_token_id", {*plan.start}, vocab_size);
  }
  if (plan.pad) check_in_vocabulary("pad_token_id", {*plan.pad}, vocab_size);
  if (config.forced_bos_token_id()) {
    check_in_vocabulary("forced_bos_token_id", {*config.forced_bos_token_id()}, vocab_size);
  }
  check_in_vocabulary("forced_eos_token_id", config.forced_eos_token_id(), vocab_size);
  std::vector<int64_t> biased;
  for (const auto& word : config.bad_words_ids()) {
    for (const int64_t t : word) {
      if (t >= vocab_size) biased.push_back(t);
    }
  }
  TORCH_CHECK_VALUE(biased.empty(),
                    fmt::format("The model vocabulary size is {}, but the following tokens were "
                                "being biased: {}",
                                vocab_size, biased));
  return plan;
}

}  // namespace detail
}  // namespace mha
