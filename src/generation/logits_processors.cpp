// transformers' logits processors and warpers, each as its `__call__`
// computes it (transformers/generation/logits_process.py), so that the
// processed scores are transformers' bit for bit on the same logits; and the
// list `generate` builds from a config (transformers/generation/utils.py,
// `_get_logits_processor` and `_merge_criteria_processor_list`).

#include "mha/logits_processors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

#include "generation/exact_topk.h"
#include "generation/generation_plan.h"

namespace mha {

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

/// Every token -inf but `tokens`, which get 0 (ForcedBOS / ForcedEOS).
Tensor force(const Tensor& scores, const std::vector<int64_t>& tokens) {
  Tensor forced = at::full_like(scores, kMinusInf);
  forced.index_fill_(1, id_tensor(tokens), 0.0);
  return forced;
}

}  // namespace

RepetitionPenaltyLogitsProcessor::RepetitionPenaltyLogitsProcessor(double penalty,
                                                                   Tensor prompt_ignore_length)
    : penalty_(penalty), prompt_ignore_length_(std::move(prompt_ignore_length)) {}

Tensor RepetitionPenaltyLogitsProcessor::operator()(const Tensor& input_ids, Tensor scores) const {
  const int64_t vocab = scores.size(-1);
  Tensor ids = input_ids;  // (N, t)
  if (prompt_ignore_length_.defined()) {
    const Tensor positions = at::arange(ids.size(1), at::kLong);
    ids = ids.masked_fill(positions.unsqueeze(0) < prompt_ignore_length_.unsqueeze(1), vocab);
  }
  ids = ids.clamp_max(vocab);
  const Tensor padded = at::constant_pad_nd(scores, {0, 1});  // (N, V + 1)
  Tensor score = padded.gather(1, ids);
  score = at::where(score < 0, score * penalty_, score / penalty_);
  return padded.scatter(1, ids, score).narrow(1, 0, vocab);  // a view, as transformers' slice
}

NoRepeatNGramLogitsProcessor::NoRepeatNGramLogitsProcessor(int64_t ngram_size) : n_(ngram_size) {}

Tensor NoRepeatNGramLogitsProcessor::operator()(const Tensor& input_ids, Tensor scores) const {
  const int64_t cur_len = input_ids.size(1);
  if (cur_len < n_) return scores;
  const Tensor prefix = input_ids.narrow(1, cur_len + 1 - n_, n_ - 1);  // (N, n - 1)
  const Tensor windows = input_ids.unfold(1, n_, 1);                    // (N, W, n)
  const Tensor matches = (windows.narrow(2, 0, n_ - 1) == prefix.unsqueeze(1)).all(-1);
  const int64_t vocab = scores.size(-1);
  Tensor banned = at::zeros({scores.size(0), vocab + 1}, at::kBool);
  banned.scatter_(1,
                  at::where(matches, windows.select(2, n_ - 1).clamp_max(vocab),
                            at::full({}, vocab, at::kLong)),
                  true);
  return scores.masked_fill(banned.narrow(1, 0, vocab), kMinusInf);
}

NoBadWordsLogitsProcessor::NoBadWordsLogitsProcessor(
    std::vector<std::vector<int64_t>> bad_words_ids, const std::vector<int64_t>& eos_token_id) {
  for (auto& word : bad_words_ids) {
    const bool end_token = word.size() == 1 && std::find(eos_token_id.begin(), eos_token_id.end(),
                                                         word[0]) != eos_token_id.end();
    if (!end_token) words_.push_back(std::move(word));
  }
}

/// transformers adds a bias of 0 or -inf (SequenceBiasLogitsProcessor);
/// banning with -inf gives the same scores (x + 0 is x) without the bias tensors.
Tensor NoBadWordsLogitsProcessor::operator()(const Tensor& input_ids, Tensor scores) const {
  std::vector<int64_t> single;
  for (const auto& word : words_) {
    if (word.size() == 1) single.push_back(word[0]);
  }
  if (!single.empty()) scores.index_fill_(1, id_tensor(single), kMinusInf);
  for (const auto& word : words_) {
    const auto prefix_length = static_cast<int64_t>(word.size()) - 1;
    if (prefix_length == 0 || prefix_length > input_ids.size(1)) continue;
    const Tensor prefix = id_tensor(std::vector<int64_t>(word.begin(), word.end() - 1));
    const Tensor matching =  // (N)
        (input_ids.narrow(1, input_ids.size(1) - prefix_length, prefix_length) == prefix).all(-1);
    if (!matching.any().item<bool>()) continue;
    scores.select(1, word.back()).masked_fill_(matching, kMinusInf);
  }
  return scores;
}

MinLengthLogitsProcessor::MinLengthLogitsProcessor(int64_t min_length,
                                                   std::vector<int64_t> eos_token_id)
    : min_length_(min_length), eos_(std::move(eos_token_id)) {}

Tensor MinLengthLogitsProcessor::operator()(const Tensor& input_ids, Tensor scores) const {
  return input_ids.size(1) < min_length_ ? suppress(scores, eos_) : scores;
}

MinNewTokensLengthLogitsProcessor::MinNewTokensLengthLogitsProcessor(
    int64_t prompt_length_to_skip, int64_t min_new_tokens, std::vector<int64_t> eos_token_id)
    : min_length_(prompt_length_to_skip + min_new_tokens), eos_(std::move(eos_token_id)) {}

Tensor MinNewTokensLengthLogitsProcessor::operator()(const Tensor& input_ids, Tensor scores) const {
  return input_ids.size(1) < min_length_ ? suppress(scores, eos_) : scores;
}

ForcedBOSTokenLogitsProcessor::ForcedBOSTokenLogitsProcessor(int64_t bos_token_id)
    : token_(bos_token_id) {}

Tensor ForcedBOSTokenLogitsProcessor::operator()(const Tensor& input_ids, Tensor scores) const {
  return input_ids.size(1) == 1 ? force(scores, {token_}) : scores;
}

ForcedEOSTokenLogitsProcessor::ForcedEOSTokenLogitsProcessor(int64_t max_length,
                                                             std::vector<int64_t> eos_token_id)
    : max_length_(max_length), eos_(std::move(eos_token_id)) {}

Tensor ForcedEOSTokenLogitsProcessor::operator()(const Tensor& input_ids, Tensor scores) const {
  return input_ids.size(1) == max_length_ - 1 ? force(scores, eos_) : scores;
}

SuppressTokensLogitsProcessor::SuppressTokensLogitsProcessor(std::vector<int64_t> suppress_tokens)
    : tokens_(std::move(suppress_tokens)) {}

Tensor SuppressTokensLogitsProcessor::operator()(const Tensor& /*input_ids*/, Tensor scores) const {
  return suppress(scores, tokens_);
}

SuppressTokensAtBeginLogitsProcessor::SuppressTokensAtBeginLogitsProcessor(
    std::vector<int64_t> begin_suppress_tokens, int64_t begin_index)
    : tokens_(std::move(begin_suppress_tokens)), begin_index_(begin_index) {}

Tensor SuppressTokensAtBeginLogitsProcessor::operator()(const Tensor& input_ids,
                                                        Tensor scores) const {
  return input_ids.size(1) == begin_index_ ? suppress(scores, tokens_) : scores;
}

TemperatureLogitsWarper::TemperatureLogitsWarper(double temperature) : temperature_(temperature) {}

Tensor TemperatureLogitsWarper::operator()(const Tensor& /*input_ids*/, Tensor scores) const {
  return scores / temperature_;
}

TopKLogitsWarper::TopKLogitsWarper(int64_t top_k, int64_t min_tokens_to_keep)
    : top_k_(std::max(top_k, min_tokens_to_keep)) {}

Tensor TopKLogitsWarper::operator()(const Tensor& /*input_ids*/, Tensor scores) const {
  const int64_t k = std::min(top_k_, scores.size(-1));
  const Tensor kth = std::get<0>(detail::exact_topk(scores, k)).select(-1, k - 1).unsqueeze(-1);
  return scores.masked_fill(scores < kth, kMinusInf);  // (N, V)
}

TopPLogitsWarper::TopPLogitsWarper(double top_p, int64_t min_tokens_to_keep)
    : top_p_(top_p), keep_(min_tokens_to_keep) {}

Tensor TopPLogitsWarper::operator()(const Tensor& /*input_ids*/, Tensor scores) const {
  const auto [sorted, indices] = at::sort(scores, /*dim=*/-1, /*descending=*/false);
  const Tensor cumulative = sorted.softmax(-1).cumsum(-1);  // (N, V), ascending
  Tensor remove_sorted = cumulative <= (1 - top_p_);
  remove_sorted.narrow(-1, remove_sorted.size(-1) - keep_, keep_).fill_(false);  // the top ones
  const Tensor remove = remove_sorted.scatter(1, indices, remove_sorted);
  return scores.masked_fill(remove, kMinusInf);
}

Tensor LogitNormalization::operator()(const Tensor& /*input_ids*/, Tensor scores) const {
  return scores.log_softmax(-1);
}

namespace detail {

namespace {

/// transformers' processors for `config` and `plan`, in its order, before the warpers.
LogitsProcessorList config_processors(const GenerationConfig& config, const GenerationPlan& plan) {
  LogitsProcessorList out;
  if (config.repetition_penalty() != 1.0) {
    out.push_back(std::make_shared<RepetitionPenaltyLogitsProcessor>(config.repetition_penalty(),
                                                                     plan.prompt_padding));
  }
  if (config.no_repeat_ngram_size() > 0) {
    out.push_back(std::make_shared<NoRepeatNGramLogitsProcessor>(config.no_repeat_ngram_size()));
  }
  if (!config.bad_words_ids().empty()) {
    out.push_back(std::make_shared<NoBadWordsLogitsProcessor>(config.bad_words_ids(), plan.eos));
  }
  if (!plan.eos.empty() && config.min_length() > 0) {
    out.push_back(std::make_shared<MinLengthLogitsProcessor>(config.min_length(), plan.eos));
  }
  if (!plan.eos.empty() && config.min_new_tokens() && *config.min_new_tokens() > 0) {
    out.push_back(std::make_shared<MinNewTokensLengthLogitsProcessor>(
        plan.input_length, *config.min_new_tokens(), plan.eos));
  }
  if (config.forced_bos_token_id()) {
    out.push_back(std::make_shared<ForcedBOSTokenLogitsProcessor>(*config.forced_bos_token_id()));
  }
  if (!config.forced_eos_token_id().empty()) {
    out.push_back(std::make_shared<ForcedEOSTokenLogitsProcessor>(plan.max_length,
                                                                  config.forced_eos_token_id()));
  }
  if (!config.suppress_tokens().empty()) {
    out.push_back(std::make_shared<SuppressTokensLogitsProcessor>(config.suppress_tokens()));
  }
  if (!config.begin_suppress_tokens().empty()) {
    const int64_t begin = plan.input_length > 1 || !config.forced_bos_token_id()
                              ? plan.input_length
                              : plan.input_length + 1;
    out.push_back(std::make_shared<SuppressTokensAtBeginLogitsProcessor>(
        config.begin_suppress_tokens(), begin));
  }
  return out;
}

}  // namespace

void add_logits_processors(const GenerationConfig& config,
                           const LogitsProcessorList& extra,
                           GenerationPlan& plan) {
  LogitsProcessorList list =
      merged_by_class(config_processors(config, plan), extra, "logits processor");
  if (config.do_sample()) {
    if (config.temperature() != 1.0) {
      list.push_back(std::make_shared<TemperatureLogitsWarper>(config.temperature()));
    }
    if (config.top_k() != 0) {
      list.push_back(std::make_shared<TopKLogitsWarper>(config.top_k(), plan.min_tokens_to_keep));
    }
    if (config.top_p() < 1.0) {
      list.push_back(std::make_shared<TopPLogitsWarper>(config.top_p(), plan.min_tokens_to_keep));
    }
  }
  if (config.renormalize_logits()) list.push_back(std::make_shared<LogitNormalization>());
  plan.processors = std::move(list);
}

Tensor process_logits(const GenerationPlan& plan, const Tensor& sequences, Tensor scores) {
  for (const auto& processor : plan.processors) scores = (*processor)(sequences, scores);
  // A processor may return a view (the repetition penalty's narrow of its padded
  // scatter): every consumer gets rows it can view and write.
  return scores.contiguous();
}

}  // namespace detail
}  // namespace mha
