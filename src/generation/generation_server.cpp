// GenerationServer: `generate`'s loops (generation/sample.cpp, and
// BeamSearch of generation/beam_search.cpp) for many requests at once, each
// step one `ContinuousBatch` step over every active request's new tokens,
// then each request's own processors and draw, or its beam step.

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <mha/generation_server.h>
#include <torch/utils.h>

#include <algorithm>

#include "generation/decoding.h"
#include "generation/logits_processors.h"
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
  /// (1, t) int64: the first tokens, then the generated ones; a finished
  /// beam search's best hypotheses (R, T).
  Tensor sequence;
  int64_t first_length = 0;  ///< the first tokens (prompt or decoder start)
  int64_t id = 0;            ///< its id in the server
  /// Its sequences in the `ContinuousBatch`: one, or the running beams.
  std::vector<int64_t> batch_ids;
  std::unique_ptr<BeamSearch> beams;  ///< with `num_beams` > 1
  int64_t fed = 0;                    ///< positions the batch has seen, every beam alike
  bool done = false;

  /// The running sequences: (1, t), or the beams' (B, t).
  Tensor running() const { return beams ? beams->sequences() : sequence; }
};

}  // namespace detail

namespace {

/// Whether `r` ends with its last token: `max_length` reached, or an end token.
bool ends(const detail::ServedRequest& r, int64_t token) {
  if (r.sequence.size(1) >= r.plan.max_length) return true;
  return std::find(r.plan.eos.begin(), r.plan.eos.end(), token) != r.plan.eos.end();
}

/// A step's inputs: each sequence's id in the batch, new rows (embedded) and their count.
struct StepInputs {
  std::vector<Tensor> rows;  ///< (t, E) each
  std::vector<int64_t> ids, lengths;
};

/// Appends `r`'s sequences' new positions to `in`: a prompt (or decoder
/// start), or each beam's last token.
void gather(const detail::ServedModel& model, const detail::ServedRequest& r, StepInputs& in) {
  const Tensor sequences = r.running();  // (rows, t)
  const int64_t t = sequences.size(1) - r.fed;
  for (size_t j = 0; j < r.batch_ids.size(); ++j) {
    in.rows.push_back(model.embed(sequences[j].narrow(0, r.fed, t), r.fed));  // (t, E)
    in.ids.push_back(r.batch_ids[j]);
    in.lengths.push_back(t);
  }
}

/// A beam search's step from its sequences' `logits` (k, V): before the
/// first step the beams are one sequence (k = 1). The new beams fork their
/// parents' sequences in `batch` (sharing their blocks), the old ones leave.
void advance_beams(ContinuousBatch& batch, detail::ServedRequest& r, const Tensor& logits) {
  const int64_t beams = r.config.num_beams();
  const Tensor parents =  // (B)
      r.beams->advance(logits.size(0) == 1 ? logits.expand({beams, -1}) : logits).contiguous();
  const int64_t* parent = parents.data_ptr<int64_t>();
  std::vector<int64_t> next;
  for (int64_t j = 0; j < beams; ++j) {
    next.push_back(batch.fork(r.batch_ids[r.batch_ids.size() == 1 ? 0 : parent[j]]));
  }
  for (const int64_t id : r.batch_ids) batch.remove(id);
  r.batch_ids = std::move(next);
  r.fed = r.beams->sequences().size(1) - 1;
}

}  // namespace

GenerationServer::GenerationServer(CausalLM model, const ContinuousBatchOptions& options)
    : model_(detail::served(std::move(model))),
      batch_(model_->make_batch(options)),
      batch_invariant_(options.batch_invariant()) {}

GenerationServer::GenerationServer(Seq2SeqLM model, const ContinuousBatchOptions& options)
    : model_(detail::served(std::move(model))),
      batch_(model_->make_batch(options)),
      batch_invariant_(options.batch_invariant()) {}

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
  r->sequence = model_->first_tokens(request.input_ids, r->plan);  // (1, t0)
  r->first_length = r->sequence.size(1);
  if (c.num_beams() > 1) {
    r->beams = std::make_unique<detail::BeamSearch>(
        c, r->plan, r->sequence.repeat({c.num_beams(), 1}), request.generator);
  }
  r->config = std::move(request.config);
  r->generator = std::move(request.generator);
  r->on_token = std::move(request.on_token);
  std::lock_guard<std::mutex> lock(mutex_);
  r->batch_ids = {model_->admit(*batch_, request.input_ids)};
  r->id = next_id_++;
  const int64_t id = r->id;
  requests_.emplace(id, std::move(r));
  return id;
}

std::vector<int64_t> GenerationServer::step() {
  torch::NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<detail::ServedRequest*> active;
  StepInputs in;
  for (auto& [id, r] : requests_) {
    if (r->done) continue;
    gather(*model_, *r, in);
    active.push_back(r.get());
  }
  if (active.empty()) return {};
  const Tensor out = batch_->step(at::cat(in.rows), in.ids, in.lengths);  // (T, E)
  const Tensor ends_at = torch::tensor(in.lengths, torch::kLong).cumsum(0) - 1;
  const Tensor last = out.index_select(0, ends_at);  // (P, E): each sequence's last row
  // Batch invariance: the head runs on each sequence's row alone.
  const Tensor logits = batch_invariant_ ? Tensor() : model_->logits(last);  // (P, V)
  std::vector<int64_t> ended;
  int64_t row = 0;
  for (detail::ServedRequest* r : active) {
    const auto k = static_cast<int64_t>(r->batch_ids.size());
    const Tensor rows = logits.defined() ? logits.narrow(0, row, k)  // (k, V)
                                         : model_->logits(last.narrow(0, row, k));
    row += k;
    if (advance(*r, rows)) ended.push_back(r->id);
  }
  return ended;
}

bool GenerationServer::advance(detail::ServedRequest& r, const Tensor& logits) {
  if (r.beams) {
    advance_beams(*batch_, r, logits);
    if (!r.beams->done()) return false;
    r.sequence = r.beams->result().sequences;  // (R, T)
    for (int64_t i = r.first_length; i < r.sequence.size(1) && r.on_token; ++i) {
      r.on_token(r.id, r.sequence[0][i].item<int64_t>());  // the best hypothesis, at the end
    }
    finish(r);
    return true;
  }
  const int64_t token =
      detail::next_tokens(r.config, r.plan, r.sequence, logits, r.generator).item<int64_t>();
  r.fed = r.sequence.size(1);
  r.sequence = at::cat({r.sequence, torch::full({1, 1}, token, torch::kLong)}, 1);
  if (r.on_token) r.on_token(r.id, token);
  if (!ends(r, token)) return false;
  finish(r);
  return true;
}

void GenerationServer::run() {
  while (num_active() > 0) step();
}

void GenerationServer::cancel(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  detail::ServedRequest& r = request(id);
  if (r.done) return;
  if (r.beams) r.sequence = r.beams->sequences().narrow(0, 0, 1);  // the best running beam
  finish(r);
}

Tensor GenerationServer::take(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  const detail::ServedRequest& r = request(id);
  TORCH_CHECK_VALUE(r.done, fmt::format("GenerationServer::take: request {} is still decoding "
                                        "(step until it ends, or cancel it)",
                                        id));
  Tensor sequence = r.sequence;
  requests_.erase(id);
  return sequence;
}

int64_t GenerationServer::num_active() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::count_if(requests_.begin(), requests_.end(),
                       [](const auto& entry) { return !entry.second->done; });
}

int64_t GenerationServer::num_free_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return batch_->num_free_blocks();
}

bool GenerationServer::done(int64_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return request(id).done;
}

detail::ServedRequest& GenerationServer::request(int64_t id) const {
  const auto found = requests_.find(id);
  TORCH_CHECK_VALUE(found != requests_.end(),
                    fmt::format("GenerationServer: no request {} (taken, or never submitted)", id));
  return *found->second;
}

void GenerationServer::finish(detail::ServedRequest& request) {
  for (const int64_t id : request.batch_ids) batch_->remove(id);
  request.batch_ids.clear();
  request.done = true;
}

}  // namespace mha
