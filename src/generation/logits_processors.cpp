// transformers' greedy-decoding logits processors, each as its `__call__`
// computes it (transformers/generation/logits_process.py), so that the
// processed scores are transformers' bit for bit on the same logits.

#include "generation/logits_processors.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>

#include "generation/exact_topk.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

/// The ids of `tokens` as a (K) int64 tensor.
Tensor id_tensor(const std::vector<int64_t>& tokens) { return at::tensor(tokens, at::kLong); }

/// `torch.where(isin(arange(V), tokens), -inf, scores)`.
Tensor suppress(const Tensor& scores, const std::vector<int64_t>& tokens) {
  const Tensor vocab = at::arange(scores.size(-1), at::kLong);
  return at::where(at::isin(vocab, id_tensor(tokens)), kMinusInf, scores);
}

/// RepetitionPenaltyLogitsProcessor: each token already in the row (after
/// its left padding `padding` (N), when defined) has its score divided by
/// `penalty` when positive, multiplied when negative.
Tensor repetition_penalty(const Tensor& sequences,
                          const Tensor& scores,
                          double penalty,
                          const Tensor& padding) {
  const int64_t vocab = scores.size(-1);
  Tensor ids = sequences;  // (N, t)
  if (padding.defined()) {
    const Tensor positions = at::arange(ids.size(1), at::kLong);
    ids = ids.masked_fill(positions.unsqueeze(0) < padding.unsqueeze(1), vocab);
  }
  ids = ids.clamp_max(vocab);
  const Tensor padded = at::constant_pad_nd(scores, {0, 1});  // (N, V + 1)
  Tensor score = padded.gather(1, ids);
  score = at::where(score < 0, score * penalty, score / penalty);
  return padded.scatter(1, ids, score).narrow(1, 0, vocab);
}

/// NoRepeatNGramLogitsProcessor: a token that would repeat an n-gram of the row is banned.
Tensor no_repeat_ngram(const Tensor& sequences, const Tensor& scores, int64_t n) {
  const int64_t cur_len = sequences.size(1);
  if (cur_len < n) return scores;
  const Tensor prefix = sequences.narrow(1, cur_len + 1 - n, n - 1);  // (N, n - 1)
  const Tensor windows = sequences.unfold(1, n, 1);                   // (N, W, n)
  const Tensor matches = (windows.narrow(2, 0, n - 1) == prefix.unsqueeze(1)).all(-1);
  const int64_t vocab = scores.size(-1);
  Tensor banned = at::zeros({scores.size(0), vocab + 1}, at::kBool);
  banned.scatter_(
      1,
      at::where(matches, windows.select(2, n - 1).clamp_max(vocab), at::full({}, vocab, at::kLong)),
      true);
  return scores.masked_fill(banned.narrow(1, 0, vocab), kMinusInf);
}

/// NoBadWordsLogitsProcessor (SequenceBiasLogitsProcessor with -inf): a bad
/// word's last token is banned where the row ends with its other tokens.
/// transformers adds a bias of 0 or -inf; banning with -inf gives the same
/// scores (x + 0 is x) without the bias tensors. Writes into `scores`.
Tensor bad_words(const Tensor& sequences,
                 Tensor scores,
                 const std::vector<std::vector<int64_t>>& words) {
  std::vector<int64_t> single;
  for (const auto& word : words) {
    if (word.size() == 1) single.push_back(word[0]);
  }
  Tensor banned = single.empty() ? scores : scores.index_fill_(1, id_tensor(single), kMinusInf);
  for (const auto& word : words) {
    const auto prefix_length = static_cast<int64_t>(word.size()) - 1;
    if (prefix_length == 0 || prefix_length > sequences.size(1)) continue;
    const Tensor prefix = id_tensor(std::vector<int64_t>(word.begin(), word.end() - 1));
    const Tensor matching =  // (N)
        (sequences.narrow(1, sequences.size(1) - prefix_length, prefix_length) == prefix).all(-1);
    if (!matching.any().item<bool>()) continue;
    banned.select(1, word.back()).masked_fill_(matching, kMinusInf);
  }
  return banned;
}

/// ForcedBOS/ForcedEOS: every token -inf but `tokens`, which get 0.
Tensor force(const Tensor& scores, const std::vector<int64_t>& tokens) {
  Tensor forced = at::full_like(scores, kMinusInf);
  forced.index_fill_(1, id_tensor(tokens), 0.0);
  return forced;
}

/// The warpers of sampling, in transformers' order, `keep` tokens kept at
/// least: TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper.
Tensor warp_for_sampling(const GenerationConfig& config, int64_t keep, Tensor scores) {
  if (config.temperature() != 1.0) scores = scores / config.temperature();
  if (config.top_k() != 0) {
    const int64_t k = std::min(std::max<int64_t>(config.top_k(), keep), scores.size(-1));
    const Tensor kth =
        std::get<0>(exact_topk(scores, k)).select(-1, k - 1).unsqueeze(-1);  // (N, 1)
    scores = scores.masked_fill(scores < kth, kMinusInf);
  }
  if (config.top_p() < 1.0) {
    const auto [sorted, indices] = at::sort(scores, /*dim=*/-1, /*descending=*/false);
    const Tensor cumulative = sorted.softmax(-1).cumsum(-1);  // (N, V), ascending
    Tensor remove_sorted = cumulative <= (1 - config.top_p());
    remove_sorted.narrow(-1, remove_sorted.size(-1) - keep, keep).fill_(false);  // the top ones
    const Tensor remove = remove_sorted.scatter(1, indices, remove_sorted);
    scores = scores.masked_fill(remove, kMinusInf);
  }
  return scores;
}

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
  plan.min_length =
      config.min_new_tokens() ? *config.min_new_tokens() + input_length : config.min_length();
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

Tensor process_logits(const GenerationConfig& config,
                      const GenerationPlan& plan,
                      const Tensor& sequences,
                      Tensor scores) {
  const int64_t cur_len = sequences.size(1);
  if (config.repetition_penalty() != 1.0) {
    scores =
        repetition_penalty(sequences, scores, config.repetition_penalty(), plan.prompt_padding);
  }
  if (config.no_repeat_ngram_size() > 0) {
    scores = no_repeat_ngram(sequences, scores, config.no_repeat_ngram_size());
  }
  if (!config.bad_words_ids().empty()) {
    // transformers drops the bad words that are one end token.
    std::vector<std::vector<int64_t>> words;
    for (const auto& word : config.bad_words_ids()) {
      const bool end_token = word.size() == 1 &&
                             std::find(plan.eos.begin(), plan.eos.end(), word[0]) != plan.eos.end();
      if (!end_token) words.push_back(word);
    }
    scores = bad_words(sequences, scores, words);
  }
  if (!plan.eos.empty() && plan.min_length > 0 && cur_len < plan.min_length) {
    scores = suppress(scores, plan.eos);  // MinLength (and MinNewTokens, the same bound)
  }
  if (config.forced_bos_token_id() && cur_len == 1) {
    scores = force(scores, {*config.forced_bos_token_id()});
  }
  if (!config.forced_eos_token_id().empty() && cur_len == plan.max_length - 1) {
    scores = force(scores, config.forced_eos_token_id());
  }
  if (!config.suppress_tokens().empty()) scores = suppress(scores, config.suppress_tokens());
  if (!config.begin_suppress_tokens().empty()) {
    const int64_t begin = plan.input_length > 1 || !config.forced_bos_token_id()
                              ? plan.input_length
                              : plan.input_length + 1;
    if (cur_len == begin) scores = suppress(scores, config.begin_suppress_tokens());
  }
  if (config.do_sample()) scores = warp_for_sampling(config, plan.min_tokens_to_keep, scores);
  if (config.renormalize_logits()) scores = scores.log_softmax(-1);
  return scores;
}

}  // namespace detail
}  // namespace mha
