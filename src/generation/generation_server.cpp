// GenerationServer: `generate`'s loop without beams (generation/sample.cpp)
// for many requests at once, each step one `ContinuousBatch` step over every
// active request's new tokens, then each request's own processors and draw.

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <mha/generation_server.h>
#include <torch/utils.h>

#include <algorithm>

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
  Tensor sequence;       ///< (1, t) int64: the first tokens, then the generated ones
  int64_t id = 0;        ///< its id in the server
  int64_t batch_id = 0;  ///< its id in the `ContinuousBatch`
  int64_t fed = 0;       ///< tokens of `sequence` the batch has seen
  bool done = false;
};

}  // namespace detail

namespace {

/// transformers' choice of the next token for one row, as `_sample` makes it:
/// `logits` (1, V) of the row after `sequence` (1, t).
int64_t choose(const detail::ServedRequest& r, const Tensor& logits) {
  const Tensor scores =
      detail::process_logits(r.config, r.plan, r.sequence, logits.to(at::kFloat).clone());
  const Tensor next = r.config.do_sample()
                          ? at::multinomial(scores.softmax(-1), 1, /*replacement=*/false,
                                            r.generator)
                                .squeeze(1)
                          : scores.argmax(-1);  // (1)
  return next.item<int64_t>();
}

/// Whether `r` ends with its last token: `max_length` reached, or an end token.
bool ends(const detail::ServedRequest& r, int64_t token) {
  if (r.sequence.size(1) >= r.plan.max_length) return true;
  return std::find(r.plan.eos.begin(), r.plan.eos.end(), token) != r.plan.eos.end();
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
  TORCH_CHECK_VALUE(c.num_beams() == 1,
                    fmt::format("GenerationServer: `num_beams` = {} is not served (beam search "
                                "runs through mha::generate); set it to 1",
                                c.num_beams()));
  TORCH_CHECK_VALUE(c.num_return_sequences() == 1,
                    fmt::format("GenerationServer: `num_return_sequences` = {} is not served; "
                                "submit the request that many times, each with its generator",
                                c.num_return_sequences()));
  torch::NoGradGuard no_grad;
  auto r = std::make_unique<detail::ServedRequest>();
  r->plan = model_->plan(c, request.input_ids);
  r->sequence = model_->first_tokens(request.input_ids, r->plan);
  r->config = std::move(request.config);
  r->generator = std::move(request.generator);
  r->on_token = std::move(request.on_token);
  std::lock_guard<std::mutex> lock(mutex_);
  r->batch_id = model_->admit(*batch_, request.input_ids);
  r->id = next_id_++;
  const int64_t id = r->id;
  requests_.emplace(id, std::move(r));
  return id;
}

std::vector<int64_t> GenerationServer::step() {
  torch::NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<detail::ServedRequest*> active;
  std::vector<Tensor> rows;
  std::vector<int64_t> ids, lengths;
  for (auto& [id, r] : requests_) {
    if (r->done) continue;
    const int64_t t = r->sequence.size(1) - r->fed;
    rows.push_back(model_->embed(r->sequence[0].narrow(0, r->fed, t), r->fed));  // (t, E)
    active.push_back(r.get());
    ids.push_back(r->batch_id);
    lengths.push_back(t);
  }
  if (active.empty()) return {};
  const Tensor out = batch_->step(at::cat(rows), ids, lengths);  // (T, E)
  const Tensor ends_at = torch::tensor(lengths, torch::kLong).cumsum(0) - 1;
  const Tensor last = out.index_select(0, ends_at);  // (R, E)
  // Batch invariance: the head runs on each request's row alone.
  const Tensor logits = batch_invariant_ ? Tensor() : model_->logits(last);  // (R, V)
  std::vector<int64_t> ended;
  for (size_t i = 0; i < active.size(); ++i) {
    detail::ServedRequest& r = *active[i];
    const Tensor row = logits.defined()
                           ? logits.narrow(0, static_cast<int64_t>(i), 1)
                           : model_->logits(last.narrow(0, static_cast<int64_t>(i), 1));  // (1, V)
    const int64_t token = choose(r, row);
    r.fed = r.sequence.size(1);
    r.sequence = at::cat({r.sequence, torch::full({1, 1}, token, torch::kLong)}, 1);
    if (r.on_token) r.on_token(r.id, token);
    if (ends(r, token)) {
      finish(r);
      ended.push_back(r.id);
    }
  }
  return ended;
}

void GenerationServer::run() {
  while (num_active() > 0) step();
}

void GenerationServer::cancel(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  detail::ServedRequest& r = request(id);
  if (!r.done) finish(r);
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
  batch_->remove(request.batch_id);
  request.done = true;
}

}  // namespace mha
