// transformers' vectorized beam search (transformers/generation/utils.py,
// `_beam_search` and its helpers `_get_top_k_continuations`,
// `_get_running_beams_for_next_iteration`, `_update_finished_beams`,
// `_check_early_stop_heuristic`, `_beam_search_has_unfinished_sequences`),
// op for op, so that the same log-probabilities give the same beams, ties
// included, and the same scores.

#include <ATen/ATen.h>

#include <cmath>
#include <tuple>

#include "generation/decoding.h"
#include "generation/exact_topk.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

constexpr double kFinished = -1.0e9;  ///< transformers' score of a hypothesis out of the race

/// `tensor` (N, B, ...) gathered along the beams by `indices` (N, K) -> (N, K, ...).
Tensor gather_beams(const Tensor& tensor, Tensor indices) {
  while (indices.dim() < tensor.dim()) indices = indices.unsqueeze(-1);
  return at::take_along_dim(tensor, indices, 1);
}

/// The state before the first step, from `input_ids` (N * B, t0).
Beams start(const Tensor& input_ids, const Shape& s, int64_t fill) {
  Beams b;
  b.running_sequences = at::full({s.batch, s.beams, s.max_length}, fill, at::kLong);
  b.running_sequences.narrow(2, 0, s.prompt).copy_(input_ids.view({s.batch, s.beams, s.prompt}));
  b.sequences = b.running_sequences.clone();
  // Only the first beam's tokens compete at first (the others repeat it).
  b.running_beam_scores = at::zeros({s.batch, s.beams}, at::kFloat);
  b.running_beam_scores.narrow(1, 1, s.beams - 1).fill_(kFinished);
  b.beam_scores = at::full({s.batch, s.beams}, kFinished, at::kFloat);
  b.is_sent_finished = at::zeros({s.batch, s.beams}, at::kBool);
  b.improvable = at::ones({s.batch, 1}, at::kBool);
  b.running_beam_indices =
      at::full({s.batch, s.beams, s.max_length - s.prompt}, -1, at::TensorOptions(at::kInt));
  b.beam_indices = b.running_beam_indices.clone();
  return b;
}

/// The K best (or sampled) continuations of `scores` (N, B * V), the
/// accumulated log-probabilities: their scores (N, K), sequences
/// (N, K, max_length) and beam indices (N, K, max_length - t0).
std::tuple<Tensor, Tensor, Tensor> top_k_continuations(const Beams& b,
                                                       const Tensor& scores,
                                                       int64_t cur_len,
                                                       const Shape& s,
                                                       bool do_sample,
                                                       const std::optional<at::Generator>& gen) {
  Tensor log_probs, indices;  // (N, K)
  if (do_sample) {
    indices = at::multinomial(at::softmax(scores, -1), s.keep, /*replacement=*/false, gen);
    log_probs = scores.gather(1, indices);
  } else {
    std::tie(log_probs, indices) = exact_topk(scores, s.keep);
  }
  const int64_t vocab = scores.size(-1) / s.beams;
  const Tensor beam = at::div(indices, vocab, "floor");  // (N, K)
  Tensor beam_indices = gather_beams(b.running_beam_indices, beam);
  Tensor sequences = gather_beams(b.running_sequences, beam);
  sequences.select(2, cur_len).copy_(at::remainder(indices, vocab));
  const Tensor offset = at::arange(s.batch, at::kLong).view({-1, 1}) * s.beams;
  beam_indices.select(2, cur_len - s.prompt).copy_(beam + offset);
  return {log_probs, sequences, beam_indices};
}

/// The B best continuations that did not stop become the running beams.
void next_running_beams(Beams& b,
                        const Tensor& log_probs,
                        const Tensor& sequences,
                        const Tensor& beam_indices,
                        int64_t beams) {
  const Tensor running_log_probs = log_probs + b.hits_stop.to(at::kFloat) * kFinished;
  const Tensor next = std::get<1>(at::topk(running_log_probs, beams));
  b.running_sequences = gather_beams(sequences, next);
  b.running_beam_scores = gather_beams(running_log_probs, next);
  b.running_beam_indices = gather_beams(beam_indices, next);
}

/// The continuations among the top B that stopped join the finished
/// hypotheses, length-penalized, where they beat them.
void update_finished(Beams& b,
                     Tensor log_probs,
                     const Tensor& sequences,
                     const Tensor& beam_indices,
                     int64_t cur_len,
                     const Shape& s,
                     const GenerationConfig& config) {
  const Tensor top_beams = at::arange(s.keep, at::kLong) < s.beams;  // (K)
  const Tensor just_finished = b.hits_stop & top_beams.unsqueeze(0);
  log_probs =
      log_probs / std::pow(static_cast<double>(cur_len + 1 - s.prompt), config.length_penalty());
  // Full inputs take no more hypotheses with `early_stopping` true.
  const Tensor full = config.early_stopping() == EarlyStopping::kTrue
                          ? b.is_sent_finished.all(-1, /*keepdim=*/true)
                          : at::zeros({s.batch, 1}, at::kBool);
  log_probs += full.to(at::kFloat) * kFinished;
  log_probs += b.improvable.logical_not().to(at::kFloat) * kFinished;
  log_probs += just_finished.logical_not() * kFinished;
  const Tensor merged_scores = at::cat({b.beam_scores, log_probs}, 1);  // (N, B + K)
  const Tensor best = std::get<1>(at::topk(merged_scores, s.beams));
  b.sequences = gather_beams(at::cat({b.sequences, sequences}, 1), best);
  b.beam_scores = gather_beams(merged_scores, best);
  b.beam_indices = gather_beams(at::cat({b.beam_indices, beam_indices}, 1), best);
  b.is_sent_finished = gather_beams(at::cat({b.is_sent_finished, just_finished}, 1), best);
}

/// transformers' `_check_early_stop_heuristic` at the new `cur_len`.
void check_improvable(Beams& b, int64_t cur_len, const Shape& s, const GenerationConfig& config) {
  const double penalty = config.length_penalty();
  const int64_t length = config.early_stopping() == EarlyStopping::kNever && penalty > 0.0
                             ? s.max_length - s.prompt
                             : cur_len - s.prompt;
  const Tensor best_possible =
      b.running_beam_scores.narrow(1, 0, 1) / std::pow(static_cast<double>(length), penalty);
  const Tensor worst_finished = at::where(
      b.is_sent_finished, std::get<0>(at::min(b.beam_scores, 1, /*keepdim=*/true)), kFinished);
  b.improvable = b.improvable & (best_possible > worst_finished).any(-1, /*keepdim=*/true);
}

/// transformers' `_beam_search_has_unfinished_sequences`.
bool has_unfinished(const Beams& b, const GenerationConfig& config) {
  const bool improvement_possible = b.improvable.any().item<bool>();
  const bool exists_open_beam =
      !(b.is_sent_finished.all().item<bool>() && config.early_stopping() == EarlyStopping::kTrue);
  const bool valid_continuations = !b.hits_stop.all().item<bool>();
  return improvement_possible && exists_open_beam && valid_continuations;
}

/// Which continuations `sequences` (N, K, max_length) meet the plan's
/// stopping criteria with their token at `cur_len`: (N, K) bool.
Tensor continuations_stop(const Tensor& sequences, int64_t cur_len, const GenerationPlan& plan) {
  const Tensor rows = sequences.narrow(2, 0, cur_len + 1).flatten(0, 1);  // (N K, cur_len + 1)
  return stops(plan, rows).view({sequences.size(0), sequences.size(1)});
}

/// transformers' fill of unwritten positions: `pad_token_id or
/// eos_token_id[0]` (a pad token of 0 counts as none) with an end token, else -1.
int64_t fill_value(const GenerationPlan& plan) {
  if (plan.eos.empty()) return -1;
  return plan.pad && *plan.pad != 0 ? *plan.pad : plan.eos.front();
}

/// The best `returned` finished hypotheses of each input, cropped to the
/// longest: sequences (N * R, T) and scores (N * R).
Decoded best_hypotheses(const Beams& b, int64_t returned, int64_t prompt) {
  const Tensor sequences = b.sequences.narrow(1, 0, returned).flatten(0, 1);   // (N R, max)
  const Tensor scores = b.beam_scores.narrow(1, 0, returned).flatten(0, 1);    // (N R)
  const Tensor indices = b.beam_indices.narrow(1, 0, returned).flatten(0, 1);  // (N R, ...)
  const int64_t generated = (indices + 1).to(at::kBool).sum(1).max().item<int64_t>();
  return {sequences.narrow(1, 0, prompt + generated), scores};
}

}  // namespace

BeamSearch::BeamSearch(const GenerationConfig& config,
                       const GenerationPlan& plan,
                       const Tensor& input_ids,
                       std::optional<at::Generator> generator)
    : config_(config), plan_(plan), generator_(std::move(generator)) {
  shape_.beams = config.num_beams();
  shape_.batch = input_ids.size(0) / shape_.beams;
  shape_.prompt = input_ids.size(1);
  shape_.keep = std::max<int64_t>(2, 1 + static_cast<int64_t>(plan.eos.size())) * shape_.beams;
  shape_.max_length = plan.max_length;
  cur_len_ = shape_.prompt;
  beams_ = start(input_ids, shape_, fill_value(plan));
  beams_.hits_stop = at::zeros({shape_.batch, shape_.beams}, at::kBool);
}

Tensor BeamSearch::sequences() const {
  return beams_.running_sequences.narrow(2, 0, cur_len_).flatten(0, 1);  // (N B, t)
}

Tensor BeamSearch::advance(const Tensor& logits) {
  const Shape& s = shape_;
  Beams& b = beams_;
  const Tensor processed =  // (N B, V)
      process_logits(plan_, sequences(), logits.to(at::kFloat).log_softmax(-1));
  const Tensor scores =  // (N, B V)
      (processed.view({s.batch, s.beams, -1}) + b.running_beam_scores.unsqueeze(-1))
          .view({s.batch, -1});
  const auto [log_probs, candidates, beam_indices] =
      top_k_continuations(b, scores, cur_len_, s, config_.do_sample(), generator_);
  b.hits_stop = continuations_stop(candidates, cur_len_, plan_);
  next_running_beams(b, log_probs, candidates, beam_indices, s.beams);
  update_finished(b, log_probs, candidates, beam_indices, cur_len_, s, config_);
  const Tensor parents = b.running_beam_indices.select(2, cur_len_ - s.prompt).flatten();
  ++cur_len_;
  check_improvable(b, cur_len_, s, config_);
  done_ = !has_unfinished(b, config_);
  return parents.to(at::kLong);  // (N B)
}

Decoded BeamSearch::result() const {
  return best_hypotheses(beams_, config_.num_return_sequences(), shape_.prompt);
}

}  // namespace detail
}  // namespace mha
