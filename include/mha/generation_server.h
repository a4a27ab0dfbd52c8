#pragma once

// Many generation requests at once: requests, each with its own generation
// config and generator, join and leave between steps; each step decodes one
// token for every active request as one `ContinuousBatch` step; tokens are
// streamed to the request's callback as they are chosen; a request can be
// cancelled. See docs/decoding.md.

#include <ATen/core/Generator.h>
#include <mha/batching.h>
#include <mha/generation_config.h>
#include <mha/hf_language_models.h>
#include <mha/logits_processors.h>
#include <mha/stopping_criteria.h>
#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mha {

namespace detail {
class ServedModel;
struct ServedRequest;
}  // namespace detail

/// Called with a request's id and each token as it is chosen.
using TokenCallback = std::function<void(int64_t id, int64_t token)>;

/// One request of a `GenerationServer`.
struct GenerationRequest {
  /// (L) int64: a decoder-only model's prompt, or a seq2seq model's source; no padding.
  torch::Tensor input_ids;
  /// How to decode it: greedy, sampling or beam search (`num_return_sequences`
  /// above 1 with beams only).
  GenerationConfig config;
  /// The samples' source; none: the default CPU generator.
  std::optional<at::Generator> generator;
  /// The caller's logits processors and stopping criteria, as `generate` takes them.
  LogitsProcessorList logits_processor;
  /// See `logits_processor`.
  StoppingCriteriaList stopping_criteria;
  /// The model's tokenizer: needed where `config` has `stop_strings`.
  std::optional<Tokenizer> tokenizer;
  /// Receives each token as it is chosen (may be empty); a beam search's
  /// tokens (its best hypothesis') when it ends, since no beam is final before.
  /// A callback that throws fails its request alone.
  TokenCallback on_token;
  /// The request fails (its blocks freed) at the first step that starts
  /// after this time; none: no deadline.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  /// Admission order: a waiting request of higher priority is admitted
  /// before those of lower; first come, first served among equals.
  int64_t priority = 0;
};

/// Where a request of a `GenerationServer` stands.
enum class RequestState {
  kWaiting,    ///< submitted, waiting for the blocks it may need
  kRunning,    ///< decoding
  kFinished,   ///< ended by its stopping criteria
  kCancelled,  ///< stopped by `cancel`
  kFailed,     ///< ended by its own error (`RequestStatus::error`)
};

/// A request's state and, when it failed, why.
struct RequestStatus {
  /// See `RequestState`.
  RequestState state = RequestState::kRunning;
  /// The error that ended it (its processors', its criteria's, its
  /// callback's, or "deadline passed"); empty unless failed.
  std::string error;
};

/// Serves `generate` for many requests of one `CausalLM` or `Seq2SeqLM` at
/// once over a `ContinuousBatch`: `submit` queues a request, `step` admits
/// the waiting ones whose blocks are free (a seq2seq model's source is
/// encoded then) and decodes one token for every running request in one
/// batch (a new request's prompt, or its decoder start, in the same step),
/// `cancel` stops one, `take` hands over a finished or cancelled request's
/// sequence, `status` says where one stands. However many requests are
/// submitted, none fails for want of blocks: each waits until the blocks it
/// may need are free.
///
/// Each request's tokens are those of `generate` on that request alone
/// (batch 1) with its generator: the same processors, the same draws, one
/// `multinomial` per step from its own generator. (Requests without one
/// share the default CPU generator, drawing in the order of their ids each
/// step, so their samples depend on each other.) With
/// `ContinuousBatchOptions::batch_invariant` (the batch's rows bitwise a
/// request's rows alone, the LM head run per sequence), a request's tokens
/// and draws are those of the request served alone, whichever requests
/// share its steps.
///
/// Beam search (`num_beams` > 1) runs transformers' search as `generate`
/// does, its beams as sequences of the batch: the prompt is run once, the
/// beams fork it (sharing its blocks, copied on write), and each step every
/// surviving beam forks its parent while the old beams leave.
///
/// Thread safety: every method locks one mutex, so requests may be submitted
/// and cancelled from other threads while one thread steps; callbacks run on
/// the stepping thread, under that lock (they must not call the server).
class GenerationServer {
 public:
  /// A server for `model` (eval mode, on the CPU) with the paged pools of `options`.
  GenerationServer(CausalLM model, const ContinuousBatchOptions& options = {});
  /// See above; each request's source is encoded alone at `submit`.
  GenerationServer(Seq2SeqLM model, const ContinuousBatchOptions& options = {});
  /// Frees the pools.
  ~GenerationServer();

  /// Queues `request` (its config validated, its tokens and lengths
  /// checked; nothing changes on an error) and returns its id. Requests are
  /// admitted by priority, then first come, first served, at the start of a step, as soon as
  /// the blocks each may need at most are free (`reserved_blocks`: a
  /// sequence of `max_length` positions per beam, a seq2seq source's memory),
  /// so an admitted request never runs out of blocks and a full pool never
  /// fails a step; a seq2seq source is encoded when admitted. A request that
  /// needs more blocks than the whole pool holds is a c10::Error here.
  int64_t submit(GenerationRequest request);
  /// Decodes one token for every active request; a request that ends (an
  /// end token, `max_length`) leaves the batch. Returns the ids that ended.
  /// An error of one request (its logits processors or stopping criteria
  /// throwing, its callback throwing, its deadline passed) ends that request
  /// alone, `kFailed` with the error in its `status`, its blocks freed; the
  /// step goes on for the others. A step the pools cannot hold is a
  /// c10::Error that changes no request (cancel one, or wait for some to end).
  std::vector<int64_t> step();
  /// Steps until no request is active.
  void run();
  /// Stops request `id` now (its blocks freed; what it generated is kept for
  /// `take`: a beam search's best running beam).
  void cancel(int64_t id);
  /// The sequence of request `id`, which must have ended or been cancelled,
  /// as `generate` returns it for the request alone: (1, T) int64, the
  /// prompt (or the decoder start) and the generated tokens; a beam search's
  /// (R, T), its `num_return_sequences` best hypotheses. The server forgets
  /// the request. A failed request's `take` is a c10::Error with its error
  /// (and forgets it too).
  torch::Tensor take(int64_t id);

  /// Requests still to finish: waiting or decoding.
  int64_t num_active() const;
  /// Requests waiting to be admitted.
  int64_t num_waiting() const;
  /// Self-attention blocks the admitted requests may need at most (each
  /// request's share is held from its admission to its end).
  int64_t reserved_blocks() const;
  /// Bytes of the batch's pools (`ContinuousBatch::memory_bytes`).
  int64_t memory_bytes() const;
  /// Bytes of the blocks the running requests hold (`ContinuousBatch::used_bytes`).
  int64_t used_bytes() const;
  /// Free blocks of the batch's self-attention block table (admission control).
  int64_t num_free_blocks() const;
  /// Whether request `id` has ended, failed or been cancelled.
  bool done(int64_t id) const;
  /// Where request `id` stands, and why it failed if it did.
  RequestStatus status(int64_t id) const;

 private:
  std::unique_ptr<detail::ServedModel> model_;
  std::unique_ptr<ContinuousBatch> batch_;
  std::map<int64_t, std::unique_ptr<detail::ServedRequest>> requests_;
  ContinuousBatchOptions options_;
  int64_t reserved_blocks_ = 0;         ///< the running requests' worst cases
  int64_t reserved_memory_blocks_ = 0;  ///< their sources' memories
  int64_t next_id_ = 0;
  mutable std::mutex mutex_;

  detail::ServedRequest& request(int64_t id) const;
  /// `r`'s next token (or beam step) from its sequences' `logits` (k, V);
  /// whether it ended.
  bool advance(detail::ServedRequest& r, const torch::Tensor& logits);
  /// `advance` from `r`'s rows of the step's `logits` (P, V) from `row` on,
  /// an error ending `r` alone; whether it ended.
  bool advance_alone(detail::ServedRequest& r, const torch::Tensor& logits, int64_t row);
  /// Fails the requests whose deadline has passed; appends their ids to `ended`.
  void fail_late(std::vector<int64_t>& ended);
  /// Admits waiting requests in order while their blocks are free.
  void admit_waiting(std::vector<int64_t>& ended);
  void finish(detail::ServedRequest& request, RequestState state);
};

}  // namespace mha
