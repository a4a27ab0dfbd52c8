// GenerationServer: `generate`'s searches (generation/decoding.h) for many
// requests at once, each step one `ContinuousBatch` step over every active
// request's new tokens, then each request's own search step.

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <mha/generation_server.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>

#include "generation/decoding.h"
#include "generation/generation_plan.h"
#include "generation/served_model.h"

namespace mha {

using torch::Tensor;

namespace detail {

/// A request's state in the server.
struct ServedRequest {
  GenerationConfig config;
  GenerationPlan plan;
  std::optional<at::Generator> generator;
  TokenCallback on_token;
  /// What `take` hands over once done: (1, T) int64, or a beam search's
  /// best hypotheses (R, T).
  Tensor sequence;
  int64_t first_length = 0;  ///< the first tokens (prompt or decoder start)
  int64_t id = 0;            ///< its id in the server
  /// Its sequences in the `ContinuousBatch`: one, or the running beams.
  std::vector<int64_t> batch_ids;
  /// Its decoding: greedy or sampling on one row, or beam search.
  std::unique_ptr<Search> search;
  int64_t fed = 0;  ///< positions the batch has seen, every beam alike
  std::optional<std::chrono::steady_clock::time_point> deadline;
  RequestState state = RequestState::kWaiting;
  std::string error;          ///< why it failed
  Tensor input_ids;           ///< (L): the prompt or source, until admitted
  int64_t priority = 0;       ///< admission order, higher first
  int64_t blocks = 0;         ///< self-attention blocks it may need at most
  int64_t memory_blocks = 0;  ///< a seq2seq source's memory blocks

  bool beams() const { return config.num_beams() > 1; }
  bool running() const { return state == RequestState::kRunning; }
  bool done() const { return state != RequestState::kWaiting && !running(); }
};

}  // namespace detail

namespace {

/// Blocks of `block_size` positions that `positions` take.
int64_t blocks_for(int64_t positions, int64_t block_size) {
  return (positions + block_size - 1) / block_size;
}

/// An error's message without LibTorch's backtrace.
std::string message_of(const std::exception& e) {
  if (const auto* error = dynamic_cast<const c10::Error*>(&e))
    return error->what_without_backtrace();
  return e.what();
}

/// Sets the blocks `r` may need at most: `max_length` positions for each
/// beam (beams fork their parent's blocks and copy a shared one on write, so
/// they never hold more), and a seq2seq source's memory `input_ids` (S);
/// refuses a request larger than the pools of `options`.
void reserve_blocks(detail::ServedRequest& r,
                    const Tensor& input_ids,
                    const ContinuousBatchOptions& options) {
  const int64_t size = options.block_size();
  r.blocks = blocks_for(r.plan.max_length, size) * r.config.num_beams();
  r.memory_blocks = r.plan.start ? blocks_for(input_ids.size(0), size) : 0;  // seq2seq
  TORCH_CHECK_VALUE(
      r.blocks <= options.num_blocks(),
      fmt::format("GenerationServer: the request may need {} blocks ({} beam(s) of "
                  "up to {} positions, blocks of {}), more than the pool's {}; "
                  "lower max_new_tokens or num_beams, or give the server more "
                  "blocks (ContinuousBatchOptions::num_blocks)",
                  r.blocks, r.config.num_beams(), r.plan.max_length, size, options.num_blocks()));
  TORCH_CHECK_VALUE(
      r.memory_blocks <= options.num_memory_blocks(),
      fmt::format("GenerationServer: the source's memory needs {} blocks ({} "
                  "positions, blocks of {}), more than the memory pool's {} "
                  "(ContinuousBatchOptions::num_memory_blocks)",
                  r.memory_blocks, input_ids.size(0), size, options.num_memory_blocks()));
}

/// Records why `r` fails, keeping what it had: its first running row (1, t).
void record_failure(detail::ServedRequest& r, std::string error) {
  r.sequence = r.search->sequences().narrow(0, 0, 1);
  r.error = std::move(error);
}

/// A step's inputs: each sequence's id in the batch, new tokens and their count.
struct StepInputs {
  std::vector<Tensor> tokens;  ///< (t) each
  std::vector<int64_t> ids, lengths;
};

/// Appends `r`'s sequences' new positions to `in`: a prompt (or decoder
/// start), or each beam's last token.
void gather(const detail::ServedRequest& r, StepInputs& in) {
  const Tensor sequences = r.search->sequences();  // (rows, t)
  const int64_t t = sequences.size(1) - r.fed;
  for (size_t j = 0; j < r.batch_ids.size(); ++j) {
    in.tokens.push_back(sequences[j].narrow(0, r.fed, t));  // (t)
    in.ids.push_back(r.batch_ids[j]);
    in.lengths.push_back(t);
  }
}

/// `r`'s search step from its sequences' `logits` (k, V). Before a beam
/// search's first step its beams are one sequence (k = 1); the new beams
/// fork their parents' sequences in `batch` (sharing their blocks), the old
/// ones leave.
void advance_search(ContinuousBatch& batch, detail::ServedRequest& r, const Tensor& logits) {
  const int64_t rows = r.search->sequences().size(0);
  const Tensor parents =  // (rows) or undefined
      r.search->advance(logits.size(0) < rows ? logits.expand({rows, -1}) : logits);
  r.fed = r.search->sequences().size(1) - 1;
  if (!parents.defined()) return;
  const Tensor parent_ids = parents.contiguous();
  const int64_t* parent = parent_ids.data_ptr<int64_t>();
  std::vector<int64_t> next;
  for (int64_t j = 0; j < rows; ++j) {
    next.push_back(batch.fork(r.batch_ids[r.batch_ids.size() == 1 ? 0 : parent[j]]));
  }
  for (const int64_t id : r.batch_ids) batch.remove(id);
  r.batch_ids = std::move(next);
}

}  // namespace

GenerationServer::GenerationServer(CausalLM model, const ContinuousBatchOptions& options)
    : model_(detail::served(std::move(model))),
      batch_(model_->make_batch(options)),
      options_(options) {}

GenerationServer::GenerationServer(Seq2SeqLM model, const ContinuousBatchOptions& options)
    : model_(detail::served(std::move(model))),
      batch_(model_->make_batch(options)),
      options_(options) {}

GenerationServer::~GenerationServer() = default;

int64_t GenerationServer::submit(GenerationRequest request) {
  const GenerationConfig& c = request.config;
  TORCH_CHECK_VALUE(c.num_beams() > 1 || c.num_return_sequences() == 1,
                    fmt::format("GenerationServer: `num_return_sequences` = {} is served with "
                                "beams only; submit the request that many times, each with its "
                                "generator",
                                c.num_return_sequences()));
  torch::NoGradGuard no_grad;
  auto r = std::make_unique<detail::ServedRequest>();
  r->plan = model_->plan(c, request.input_ids);
  detail::add_logits_processors(c, request.logits_processor, r->plan);
  detail::add_stopping_criteria(c, request.tokenizer, request.stopping_criteria, r->plan);
  const Tensor first = model_->first_tokens(request.input_ids, r->plan);  // (1, t0)
  r->first_length = first.size(1);
  r->search = detail::make_search(c, r->plan, first.repeat({c.num_beams(), 1}),  // (B, t0)
                                  request.generator);
  r->config = std::move(request.config);
  r->generator = std::move(request.generator);
  r->on_token = std::move(request.on_token);
  r->deadline = request.deadline;
  r->priority = request.priority;
  reserve_blocks(*r, request.input_ids, options_);
  r->input_ids = std::move(request.input_ids);
  std::lock_guard<std::mutex> lock(mutex_);
  r->id = next_id_++;
  const int64_t id = r->id;
  requests_.emplace(id, std::move(r));
  return id;
}

std::vector<int64_t> GenerationServer::step() {
  torch::NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int64_t> ended;
  fail_late(ended);
  admit_waiting(ended);
  std::vector<detail::ServedRequest*> active;
  StepInputs in;
  for (auto& [id, r] : requests_) {
    if (!r->running()) continue;
    gather(*r, in);
    active.push_back(r.get());
  }
  if (active.empty()) return ended;
  // The model's paged call: each sequence's last row's logits, (P, V).
  const Tensor logits = model_->step(*batch_, at::cat(in.tokens), in.ids, in.lengths);
  int64_t row = 0;
  for (detail::ServedRequest* r : active) {
    const auto k = static_cast<int64_t>(r->batch_ids.size());
    if (advance_alone(*r, logits, row)) ended.push_back(r->id);
    row += k;
  }
  return ended;
}

bool GenerationServer::advance_alone(detail::ServedRequest& r, const Tensor& logits, int64_t row) {
  try {
    return advance(r, logits.narrow(0, row, static_cast<int64_t>(r.batch_ids.size())));  // (k, V)
  } catch (const std::exception& e) {
    record_failure(r, message_of(e));
    finish(r, RequestState::kFailed);
    return true;
  }
}

void GenerationServer::admit_waiting(std::vector<int64_t>& ended) {
  std::vector<detail::ServedRequest*> waiting;
  for (auto& [id, r] : requests_) {
    if (r->state == RequestState::kWaiting) waiting.push_back(r.get());
  }
  std::stable_sort(waiting.begin(), waiting.end(), [](const auto* a, const auto* b) {
    return a->priority > b->priority;  // ids ascending among equals
  });
  for (detail::ServedRequest* r : waiting) {
    const int64_t id = r->id;
    if (reserved_blocks_ + r->blocks > options_.num_blocks() ||
        reserved_memory_blocks_ + r->memory_blocks > options_.num_memory_blocks()) {
      return;  // in order: no later request passes the first that waits
    }
    try {
      r->batch_ids = {model_->admit(*batch_, r->input_ids)};  // a source encoded now
    } catch (const std::exception& e) {
      record_failure(*r, message_of(e));
      finish(*r, RequestState::kFailed);
      ended.push_back(id);
      continue;
    }
    r->input_ids = Tensor();
    r->state = RequestState::kRunning;
    reserved_blocks_ += r->blocks;
    reserved_memory_blocks_ += r->memory_blocks;
  }
}

void GenerationServer::fail_late(std::vector<int64_t>& ended) {
  const auto now = std::chrono::steady_clock::now();
  for (auto& [id, r] : requests_) {
    if (r->done() || !r->deadline || now <= *r->deadline) continue;
    record_failure(*r, "deadline passed");
    finish(*r, RequestState::kFailed);
    ended.push_back(id);
  }
}

bool GenerationServer::advance(detail::ServedRequest& r, const Tensor& logits) {
  advance_search(*batch_, r, logits);
  if (!r.beams() && r.on_token) r.on_token(r.id, r.search->sequences()[0][-1].item<int64_t>());
  if (!r.search->done()) return false;
  r.sequence = r.search->result().sequences;  // (1, T), or beams' (R, T)
  for (int64_t i = r.first_length; r.beams() && i < r.sequence.size(1) && r.on_token; ++i) {
    r.on_token(r.id, r.sequence[0][i].item<int64_t>());  // the best hypothesis, at the end
  }
  finish(r, RequestState::kFinished);
  return true;
}

void GenerationServer::run() {
  while (num_active() > 0) step();
}

void GenerationServer::cancel(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  detail::ServedRequest& r = request(id);
  if (r.done()) return;
  r.sequence = r.search->sequences().narrow(0, 0, 1);  // (1, t): the best running beam
  finish(r, RequestState::kCancelled);
}

Tensor GenerationServer::take(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  const detail::ServedRequest& r = request(id);
  TORCH_CHECK_VALUE(r.done(), fmt::format("GenerationServer::take: request {} is still decoding "
                                          "(step until it ends, or cancel it)",
                                          id));
  const Tensor sequence = r.sequence;
  const std::string error = r.error;
  const bool failed = r.state == RequestState::kFailed;
  requests_.erase(id);
  TORCH_CHECK_VALUE(!failed,
                    fmt::format("GenerationServer::take: request {} failed: {}", id, error));
  return sequence;
}

int64_t GenerationServer::num_active() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::count_if(requests_.begin(), requests_.end(),
                       [](const auto& entry) { return !entry.second->done(); });
}

int64_t GenerationServer::num_waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::count_if(requests_.begin(), requests_.end(), [](const auto& entry) {
    return entry.second->state == RequestState::kWaiting;
  });
}

int64_t GenerationServer::reserved_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reserved_blocks_;
}

int64_t GenerationServer::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return batch_->memory_bytes();
}

int64_t GenerationServer::used_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return batch_->used_bytes();
}

int64_t GenerationServer::num_free_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return batch_->num_free_blocks();
}

bool GenerationServer::done(int64_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return request(id).done();
}

RequestStatus GenerationServer::status(int64_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const detail::ServedRequest& r = request(id);
  return {r.state, r.error};
}

detail::ServedRequest& GenerationServer::request(int64_t id) const {
  const auto found = requests_.find(id);
  TORCH_CHECK_VALUE(found != requests_.end(),
                    fmt::format("GenerationServer: no request {} (taken, or never submitted)", id));
  return *found->second;
}

void GenerationServer::finish(detail::ServedRequest& request, RequestState state) {
  for (const int64_t id : request.batch_ids) batch_->remove(id);
  request.batch_ids.clear();
  if (request.running()) {
    reserved_blocks_ -= request.blocks;
    reserved_memory_blocks_ -= request.memory_blocks;
  }
  request.input_ids = Tensor();
  request.state = state;
}

}  // namespace mha
