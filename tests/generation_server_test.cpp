// mha::GenerationServer against transformers' batch-1 `generate` on the
// random-weight models scripts/export_hf_reference.py writes at test time
// (`alone_greedy_<row>`, `alone_sampled_<row>`, `alone_beam_<row>`: each row
// of the reference's batch unpadded, greedy, sampled with seed 20 + row, and
// with 4 beams): six requests served together, joining at different steps,
// each with its own generator, give transformers' tokens, streamed as they
// are chosen (a beam search's when it ends); beams share their prompt's
// blocks. With
// batch invariance, a request's tokens are those of the request served
// alone, bitwise, whatever shares its steps; cancelling frees a request and
// leaves the others alone; bad requests and steps the pools cannot hold
// change nothing; requests may be submitted from another thread while one
// thread steps.

#include <ATen/CPUGeneratorImpl.h>
#include <mha/generation.h>
#include <mha/generation_server.h>
#include <mha/hf_models.h>
#include <mha/state_dict.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "hf_reference.h"
#include "support.h"

namespace {

const auto model_dir = mha::test::hf_model_dir;
const auto reference = mha::test::hf_reference;

using torch::Tensor;

/// Row `row` of the reference's batch without its padding: (L) int64.
Tensor unpadded(const std::map<std::string, Tensor>& values, int64_t row) {
  return values.at("input_ids")[row].masked_select(values.at("attention_mask")[row] == 1);
}

/// A server over the model of `name`, whichever kind it is.
mha::GenerationServer make_server(const std::string& name,
                                  const mha::ContinuousBatchOptions& options) {
  auto model = mha::load_hf_model(model_dir(name));
  if (std::holds_alternative<mha::CausalLM>(model.module))
    return mha::GenerationServer(model.as<mha::CausalLM>(), options);
  return mha::GenerationServer(model.as<mha::Seq2SeqLM>(), options);
}

/// How a request decodes: as the reference's `alone_<kind>_<row>`.
enum class Kind { kGreedy, kSampled, kBeam };

/// The reference's name of row `row` decoded as `kind`.
std::string alone_key(Kind kind, int64_t row) {
  const char* names[] = {"alone_greedy_", "alone_sampled_", "alone_beam_"};
  return names[static_cast<int>(kind)] + std::to_string(row);
}

/// One request: row `row` with the directory's config, greedy, or sampled
/// (temperature 0.7, top-k 50) from a generator seeded `20 + row`, or with
/// 4 beams; its tokens streamed into `streamed`.
mha::GenerationRequest request(const std::string& name,
                               const std::map<std::string, Tensor>& values,
                               int64_t row,
                               Kind kind,
                               std::map<int64_t, std::vector<int64_t>>& streamed) {
  mha::GenerationRequest r;
  r.input_ids = unpadded(values, row);
  r.config = mha::read_generation_config(model_dir(name));
  if (kind == Kind::kSampled) {
    r.config.do_sample(true).temperature(0.7).top_k(50);
    r.generator = at::make_generator<at::CPUGeneratorImpl>(20 + row);
  }
  if (kind == Kind::kBeam) r.config.num_beams(4);
  r.on_token = [&streamed](int64_t id, int64_t token) { streamed[id].push_back(token); };
  return r;
}

class ServedGenerate : public ::testing::TestWithParam<std::string> {};

TEST_P(ServedGenerate, EachRequestIsTransformersBatchOneCallStreamed) {
  const std::string name = GetParam();
  const auto values = reference(name);
  mha::GenerationServer server = make_server(name, mha::ContinuousBatchOptions().num_blocks(64));
  std::map<int64_t, std::vector<int64_t>> streamed;
  std::map<int64_t, std::string> expected;  // id -> the reference's key
  auto submit = [&](int64_t row, Kind kind) {
    expected[server.submit(request(name, values, row, kind, streamed))] = alone_key(kind, row);
  };
  submit(0, Kind::kGreedy);
  submit(1, Kind::kSampled);
  submit(0, Kind::kBeam);
  server.step();  // the others join a running batch
  submit(1, Kind::kGreedy);
  submit(0, Kind::kSampled);
  server.step();
  submit(1, Kind::kBeam);
  server.run();
  for (const auto& [id, key] : expected) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(server.done(id));
    const Tensor sequence = server.take(id);
    EXPECT_TRUE(torch::equal(sequence, values.at(key))) << sequence << "\n" << values.at(key);
    const int64_t generated = static_cast<int64_t>(streamed[id].size());
    EXPECT_TRUE(torch::equal(sequence[0].narrow(0, sequence.size(1) - generated, generated),
                             torch::tensor(streamed[id], torch::kLong)));
  }
  const double margin = values.at("alone_margin").item<double>();
  EXPECT_GT(margin, 1e-4) << "a near tie in the reference: the token check means little";
  RecordProperty("smallest_alone_margin", ::testing::PrintToString(margin));
}

INSTANTIATE_TEST_SUITE_P(Families,
                         ServedGenerate,
                         ::testing::Values("marian",
                                           "marian_served",
                                           "bart_generate",
                                           "mbart_generate",
                                           "gpt2",
                                           "gpt2_served",
                                           "opt",
                                           "opt_350m"));

/// Row 0 sampled from the full distribution (temperature 1, no top-k), or
/// beam-sampled with 4 beams (`beams`), 12 new tokens, served beside
/// `neighbours` other requests in batch-invariant mode: its sequences.
Tensor served_in_company(const std::string& name, int neighbours, bool beams) {
  const auto values = reference(name);
  mha::GenerationServer server =
      make_server(name, mha::ContinuousBatchOptions().num_blocks(64).batch_invariant(true));
  std::map<int64_t, std::vector<int64_t>> streamed;
  auto full_distribution = [&](int64_t row, int64_t seed) {
    mha::GenerationRequest r = request(name, values, row, Kind::kSampled, streamed);
    r.config.temperature(1.0).top_k(0).max_new_tokens(12).min_new_tokens(12);
    r.generator = at::make_generator<at::CPUGeneratorImpl>(seed);
    return r;
  };
  mha::GenerationRequest mine = full_distribution(0, 7);
  if (beams) mine.config.num_beams(4).num_return_sequences(2);
  const int64_t id = server.submit(mine);
  for (int i = 0; i < neighbours; ++i) {
    server.submit(full_distribution(i % 2, 100 + i));
    server.step();
  }
  server.run();
  return server.take(id);
}

TEST(ServedGenerate, BatchInvariantRequestsAreTheirAloneSelvesBitwise) {
  for (const std::string name : {"gpt2", "marian"}) {
    for (const bool beams : {false, true}) {
      SCOPED_TRACE(name + (beams ? ", beams" : ""));
      const Tensor alone = served_in_company(name, 0, beams);
      EXPECT_TRUE(torch::equal(served_in_company(name, 5, beams), alone));
    }
  }
}

TEST(ServedGenerate, BeamsShareTheirPromptsBlocks) {
  const auto values = reference("gpt2");
  mha::GenerationServer server =
      make_server("gpt2", mha::ContinuousBatchOptions().block_size(4).num_blocks(64));
  std::map<int64_t, std::vector<int64_t>> streamed;
  const int64_t id = server.submit(request("gpt2", values, 0, Kind::kBeam, streamed));
  server.step();  // the prompt of 7 positions, once: 2 blocks, which the 4 beams share
  EXPECT_EQ(server.num_free_blocks(), 64 - 2);
  EXPECT_TRUE(streamed[id].empty());  // no beam is final yet
  server.run();
  EXPECT_EQ(server.num_free_blocks(), 64);
  const Tensor best = server.take(id);
  EXPECT_TRUE(torch::equal(best, values.at("alone_beam_0")));
  EXPECT_EQ(static_cast<int64_t>(streamed[id].size()), best.size(1) - unpadded(values, 0).size(0));
}

TEST(ServedGenerate, CancellingARequestLeavesTheOthersAlone) {
  const auto values = reference("gpt2");
  mha::GenerationServer server = make_server("gpt2", mha::ContinuousBatchOptions().num_blocks(64));
  std::map<int64_t, std::vector<int64_t>> streamed;
  const int64_t cancelled = server.submit(request("gpt2", values, 0, Kind::kGreedy, streamed));
  const int64_t kept = server.submit(request("gpt2", values, 1, Kind::kSampled, streamed));
  server.step();
  server.step();
  server.cancel(cancelled);
  EXPECT_TRUE(server.done(cancelled));
  EXPECT_EQ(server.num_active(), 1);
  MHA_ASSERT_THROWS_WITH(server.take(kept), "request 1 is still decoding");
  server.run();
  const Tensor partial = server.take(cancelled);
  EXPECT_EQ(partial.size(1), unpadded(values, 0).size(0) + 2);
  EXPECT_EQ(streamed[cancelled].size(), 2u);
  EXPECT_TRUE(torch::equal(server.take(kept), values.at("alone_sampled_1")));
  MHA_ASSERT_THROWS_WITH(server.take(kept), "no request 1 (taken, or never submitted)");
}

/// A caller's processor that throws at its `failing_call`-th call.
class FailingProcessor : public mha::LogitsProcessor {
 public:
  explicit FailingProcessor(int failing_call) : failing_call_(failing_call) {}
  Tensor operator()(const Tensor& /*input_ids*/, Tensor scores) const override {
    TORCH_CHECK_VALUE(++calls_ < failing_call_, "a processor failed on purpose");
    return scores;
  }

 private:
  int failing_call_;
  mutable int calls_ = 0;
};

TEST(ServedGenerate, OneBadRequestFailsAloneAndTheOthersFinishExact) {
  // Beside sound requests (greedy, sampled, beams), a beam search whose
  // processor throws at its third step, a request whose callback throws at
  // its second token, and one whose deadline has passed: each fails alone,
  // readable from its status; the others are their batch-1 selves; every
  // block returns.
  for (const std::string name : {"gpt2", "marian"}) {
    SCOPED_TRACE(name);
    const auto values = reference(name);
    mha::GenerationServer server = make_server(name, mha::ContinuousBatchOptions().num_blocks(64));
    const int64_t free_blocks = server.num_free_blocks();
    std::map<int64_t, std::vector<int64_t>> streamed;
    std::map<int64_t, std::string> expected;  // id -> the reference's key
    std::map<int64_t, std::string> failing;   // id -> its error
    auto sound = [&](int64_t row, Kind kind) {
      expected[server.submit(request(name, values, row, kind, streamed))] = alone_key(kind, row);
    };
    sound(0, Kind::kGreedy);
    sound(1, Kind::kSampled);
    mha::GenerationRequest processor = request(name, values, 0, Kind::kBeam, streamed);
    processor.logits_processor = {std::make_shared<FailingProcessor>(3)};
    failing[server.submit(processor)] = "a processor failed on purpose";
    sound(0, Kind::kBeam);
    mha::GenerationRequest callback = request(name, values, 1, Kind::kGreedy, streamed);
    callback.on_token = [calls = std::make_shared<int>(0)](int64_t, int64_t) {
      TORCH_CHECK(++*calls < 2, "a callback failed on purpose");
    };
    failing[server.submit(callback)] = "a callback failed on purpose";
    mha::GenerationRequest late = request(name, values, 1, Kind::kGreedy, streamed);
    late.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
    failing[server.submit(late)] = "deadline passed";
    sound(1, Kind::kBeam);
    server.run();
    for (const auto& [id, error] : failing) {
      const mha::RequestStatus status = server.status(id);
      EXPECT_EQ(status.state, mha::RequestState::kFailed) << error;
      EXPECT_NE(status.error.find(error), std::string::npos) << status.error;
      MHA_ASSERT_THROWS_WITH(server.take(id), "failed: " + error);
    }
    for (const auto& [id, key] : expected) {
      EXPECT_EQ(server.status(id).state, mha::RequestState::kFinished) << key;
      EXPECT_TRUE(torch::equal(server.take(id), values.at(key))) << key;
    }
    EXPECT_EQ(server.num_free_blocks(), free_blocks);
  }
}

TEST(ServedGenerate, RequestsBeyondThePoolWaitAndAllFinishExact) {
  // Twelve requests of 7 + 20 positions (2 blocks of 16 each), greedy and
  // sampled, into a pool of 5 blocks: before, all were admitted and every
  // step failed "out of blocks"; now two run at a time, the others wait in
  // order, none fails, each is its batch-1 self, and every block returns.
  const auto values = reference("gpt2");
  mha::GenerationServer server =
      make_server("gpt2", mha::ContinuousBatchOptions().block_size(16).num_blocks(5));
  auto model = mha::load_hf_model(model_dir("gpt2")).as<mha::CausalLM>();
  std::map<int64_t, std::vector<int64_t>> streamed;
  std::map<int64_t, Tensor> expected;
  for (int i = 0; i < 12; ++i) {
    const bool sampled = i % 2 == 1;
    mha::GenerationRequest r =
        request("gpt2", values, 0, sampled ? Kind::kSampled : Kind::kGreedy, streamed);
    r.config.max_new_tokens(20).min_new_tokens(20);
    r.generator = at::make_generator<at::CPUGeneratorImpl>(100 + i);
    const auto alone_generator = at::make_generator<at::CPUGeneratorImpl>(100 + i);
    expected[server.submit(r)] =
        mha::generate(model, r.input_ids.unsqueeze(0), Tensor(), r.config, alone_generator);
  }
  EXPECT_EQ(server.num_waiting(), 12);
  server.step();
  EXPECT_EQ(server.num_waiting(), 10);
  EXPECT_EQ(server.reserved_blocks(), 4);
  server.run();
  for (const auto& [id, alone] : expected) {
    EXPECT_EQ(server.status(id).state, mha::RequestState::kFinished);
    EXPECT_TRUE(torch::equal(server.take(id), alone)) << "request " << id;
  }
  EXPECT_EQ(server.num_free_blocks(), 5);
  EXPECT_EQ(server.reserved_blocks(), 0);
  // Priority first, then the order of submission.
  mha::GenerationRequest twenty = request("gpt2", values, 1, Kind::kGreedy, streamed);
  twenty.config.max_new_tokens(20).min_new_tokens(20);
  const int64_t first = server.submit(twenty), second = server.submit(twenty);
  twenty.priority = 5;
  const int64_t urgent = server.submit(twenty);
  server.step();
  EXPECT_EQ(server.status(urgent).state, mha::RequestState::kRunning);
  EXPECT_EQ(server.status(first).state, mha::RequestState::kRunning);
  EXPECT_EQ(server.status(second).state, mha::RequestState::kWaiting);
  server.run();
  const Tensor alone = mha::generate(model, twenty.input_ids.unsqueeze(0), Tensor(), twenty.config);
  for (const int64_t id : {first, second, urgent}) {
    EXPECT_TRUE(torch::equal(server.take(id), alone)) << "request " << id;
  }
  // A request that could never fit is refused at submit, naming the sizes.
  mha::GenerationRequest beams = request("gpt2", values, 0, Kind::kBeam, streamed);
  beams.config.max_new_tokens(20);
  MHA_ASSERT_THROWS_WITH(server.submit(beams),
                         "the request may need 8 blocks (4 beam(s) of up to 27 positions, blocks "
                         "of 16), more than the pool's 5");
}

TEST(ServedGenerate, RequestsSubmittedFromAnotherThreadWhileOneSteps) {
  const auto values = reference("gpt2");
  mha::GenerationServer server = make_server("gpt2", mha::ContinuousBatchOptions().num_blocks(64));
  std::map<int64_t, std::vector<int64_t>> streamed;
  std::vector<int64_t> ids;
  std::atomic<bool> submitted{false};
  std::thread submitter([&] {
    for (int i = 0; i < 6; ++i) {
      ids.push_back(server.submit(
          request("gpt2", values, i % 2, i % 3 == 0 ? Kind::kSampled : Kind::kGreedy, streamed)));
    }
    submitted = true;
  });
  while (!submitted || server.num_active() > 0) server.step();
  submitter.join();
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string key = alone_key(i % 3 == 0 ? Kind::kSampled : Kind::kGreedy, i % 2);
    EXPECT_TRUE(torch::equal(server.take(ids[i]), values.at(key))) << key;
  }
}

TEST(ServedGenerate, RefusesBadRequestsChangingNothing) {
  const auto values = reference("marian");
  mha::GenerationServer server =
      make_server("marian", mha::ContinuousBatchOptions().num_blocks(64));
  std::map<int64_t, std::vector<int64_t>> streamed;
  server.submit(request("marian", values, 0, Kind::kGreedy, streamed));
  mha::GenerationRequest several = request("marian", values, 1, Kind::kSampled, streamed);
  several.config.num_return_sequences(2);
  MHA_ASSERT_THROWS_WITH(server.submit(several),
                         "`num_return_sequences` = 2 is served with beams only");
  mha::GenerationRequest outside = request("marian", values, 1, Kind::kGreedy, streamed);
  outside.input_ids = torch::tensor({5, 120}, torch::kLong);
  MHA_ASSERT_THROWS_WITH(server.submit(outside),
                         "input_ids holds token 120, outside the model's vocabulary of 99 tokens");
  mha::GenerationRequest too_long = request("marian", values, 1, Kind::kGreedy, streamed);
  too_long.config.max_new_tokens(40);
  MHA_ASSERT_THROWS_WITH(server.submit(too_long),
                         "a decoded sequence of 41 tokens, but the model has 32 positions");
  EXPECT_EQ(server.num_active(), 1);
  server.run();
  EXPECT_TRUE(torch::equal(server.take(0), values.at("alone_greedy_0")));
}

}  // namespace
