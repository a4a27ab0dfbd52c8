// Concurrency: one module in eval, shared by 8 threads that each run 200
// forwards under no_grad (grad mode is per thread), over every inference path:
// Python's native fast path (with and without weights and masks), the SDPA
// path, the weights path (averaged and per head), unbatched input and a long
// self-attention. Every result must be bitwise equal to the one the same call
// gave on a single thread first, and the parameters must be unchanged.
// A second test does the same at E = 512 (prepacked and int8 GEMMs) over
// forward, forward_cached and forward_paged (a cache per thread, the module
// shared), one ContinuousBatch shared by all threads, and an int8 module.
// A third test draws from the global generator on one thread while another
// clones modules 200 times: the draws equal those of the same seed without
// the clones (clone() draws nothing, on any thread). A fourth has 8 threads
// call mha's own parallel loop back to back (its pool threads stay awake and
// take the next call's chunks): each call runs each of its items once.
// Built with MHA_SANITIZE=tsan (scripts/test.sh --tsan) this test is the
// ThreadSanitizer check of mha.

#include <mha/batching.h>
#include <mha/mha.h>
#include <mha/multihead_attention.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "common/generator_state.h"
#include "common/parallel_items.h"
#include "support.h"

namespace {

using mha::MultiheadAttention;
using mha::MultiheadAttentionOptions;
using torch::Tensor;

constexpr int kThreads = 8;
constexpr int kForwardsPerThread = 200;

struct Call {
  std::string name;
  std::function<std::tuple<Tensor, Tensor>()> run;
};

bool same(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  return !a.defined() || mha::test::bitwise_equal(a, b);
}

struct Concurrency : mha::test::SeedingFixture {};

TEST_F(Concurrency, EightThreadsMatchOneThreadOnEveryPath) {
  // batch_first, even heads, packed weights with bias: eligible for the fast path.
  MultiheadAttention m(MultiheadAttentionOptions(16, 4).batch_first(true));
  MultiheadAttention cross(MultiheadAttentionOptions(16, 4).kdim(8).vdim(12));
  m->eval();
  cross->eval();

  const Tensor x = torch::randn({2, 5, 16});         // (N, L, E)
  const Tensor kv = torch::randn({2, 7, 16});        // (N, S, E)
  const Tensor u = torch::randn({5, 16});            // (L, E), unbatched
  const Tensor long_x = torch::randn({1, 256, 16});  // (N, L, E), L = 256
  const Tensor cq = torch::randn({5, 2, 16});        // (L, N, E), sequence-first
  const Tensor ck = torch::randn({7, 2, 8});         // (S, N, kdim)
  const Tensor cv = torch::randn({7, 2, 12});        // (S, N, vdim)
  Tensor kpm = torch::zeros({2, 5}, torch::kBool);
  kpm.index_put_({0, 3}, true);
  const Tensor causal = torch::ones({5, 5}, torch::kBool).triu(1);
  const Tensor fully_masked =
      torch::ones({2, 5}, torch::kBool).index_fill_(0, torch::tensor({1}), false);
  const Tensor float_mask = torch::randn({5, 7});

  const std::vector<Call> calls = {
      {"FastSelfWeights", [&] { return m->forward(x, x, x); }},
      {"FastSelfNoWeights", [&] { return m->forward(x, x, x, {}, false); }},
      {"FastKpm", [&] { return m->forward(x, x, x, kpm, true); }},
      {"FastCausalMaskPerHead", [&] { return m->forward(x, x, x, {}, true, causal, false); }},
      {"FastFullyMasked", [&] { return m->forward(x, x, x, fully_masked, false); }},
      {"SdpaCross", [&] { return m->forward(x, kv, kv, {}, false); }},
      {"WeightsCross", [&] { return m->forward(x, kv, kv, {}, true); }},
      {"SdpaCausalHint",
       [&] { return m->forward(x, x.clone(), x.clone(), {}, false, causal, true, true); }},
      {"Unbatched", [&] { return m->forward(u, u, u); }},
      {"LongSelfNoWeights", [&] { return m->forward(long_x, long_x, long_x, {}, false); }},
      {"KdimVdimFloatMask",
       [&] { return cross->forward(cq, ck, cv, {}, true, float_mask, false); }},
      {"KdimVdimSdpa", [&] { return cross->forward(cq, ck, cv, {}, false, float_mask); }},
  };

  std::vector<Tensor> params_before;
  for (const auto& p : m->parameters()) params_before.push_back(p.detach().clone());

  // References: one thread, no grad.
  std::vector<std::tuple<Tensor, Tensor>> expected;
  {
    torch::NoGradGuard no_grad;
    for (const auto& call : calls) expected.push_back(call.run());
  }

  std::atomic<int> mismatches{0};
  std::atomic<int> errors{0};
  std::mutex first_mutex;
  std::string first_problem;
  auto report = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(first_mutex);
    if (first_problem.empty()) first_problem = what;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      torch::NoGradGuard no_grad;  // grad mode is thread-local
      for (int i = 0; i < kForwardsPerThread; ++i) {
        const size_t c = static_cast<size_t>(t + i) % calls.size();
        try {
          const auto [out, weights] = calls[c].run();
          if (!same(out, std::get<0>(expected[c])) || !same(weights, std::get<1>(expected[c]))) {
            ++mismatches;
            report(calls[c].name + " differs on thread " + std::to_string(t));
          }
        } catch (const std::exception& e) {
          ++errors;
          report(calls[c].name + " threw on thread " + std::to_string(t) + ": " + e.what());
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();

  EXPECT_EQ(errors.load(), 0) << first_problem;
  EXPECT_EQ(mismatches.load(), 0) << first_problem;
  const auto params_after = m->parameters();
  ASSERT_EQ(params_after.size(), params_before.size());
  for (size_t i = 0; i < params_after.size(); ++i) {
    EXPECT_TRUE(mha::test::bitwise_equal(params_after[i].detach(), params_before[i]))
        << "parameter " << i;
  }
}

/// One way of serving a request at E = 512: the outputs of its steps, concatenated.
struct ServingCall {
  std::string name;
  std::function<Tensor()> run;
};

Tensor offsets(int64_t rows) { return torch::tensor({int64_t{0}, rows}); }

TEST_F(Concurrency, EightThreadsMatchOneThreadAtServingSizes) {
  constexpr int64_t kE = 512, kHeads = 8;
  MultiheadAttention m(MultiheadAttentionOptions(kE, kHeads).batch_first(true));
  m->eval();
  mha::prepack(m);  // GEMMs on packed weights
  torch::manual_seed(0);
  MultiheadAttention q(MultiheadAttentionOptions(kE, kHeads).batch_first(true));
  q->eval();
  mha::quantize_dynamic(q);
  mha::TransformerEncoder stack(
      mha::TransformerEncoderOptions(
          mha::TransformerEncoderLayer(
              mha::TransformerEncoderLayerOptions(kE, kHeads).dim_feedforward(2048).dropout(0.0)),
          1)
          .enable_nested_tensor(false));
  stack->eval();
  mha::prepack(stack);
  mha::ContinuousBatch batch(stack, mha::ContinuousBatchOptions().block_size(16).num_blocks(64));

  const Tensor x = torch::randn({1, 16, kE});  // (N, L, E)
  const Tensor prompt = torch::randn({8, kE});
  const std::vector<Tensor> tokens = {torch::randn({1, kE}), torch::randn({1, kE})};
  const std::vector<ServingCall> calls = {
      {"Forward", [&] { return std::get<0>(m->forward(x, x, x, {}, false)); }},
      {"Int8Forward", [&] { return std::get<0>(q->forward(x, x, x, {}, false)); }},
      {"ForwardCached",
       [&] {
         auto cache = mha::KVCache::self_attention();
         std::vector<Tensor> outs;
         for (const Tensor& t : {prompt, tokens[0], tokens[1]}) {
           const Tensor b = t.unsqueeze(0);  // (1, L, E)
           outs.push_back(std::get<0>(m->forward_cached(b, b, b, cache)).squeeze(0));
         }
         return torch::cat(outs);
       }},
      {"ForwardPaged",
       [&] {
         mha::PagedKVCache cache(*m, mha::PagedKVCacheOptions(4, 16));
         const int64_t id = cache.add_sequence();
         std::vector<Tensor> outs;
         for (const Tensor& t : {prompt, tokens[0], tokens[1]}) {
           outs.push_back(std::get<0>(m->forward_paged(t, t, t, cache, {id}, offsets(t.size(0)))));
         }
         return torch::cat(outs);
       }},
      {"ContinuousBatch",
       [&] {
         const int64_t id = batch.add();
         std::vector<Tensor> outs;
         for (const Tensor& t : {prompt, tokens[0], tokens[1]})
           outs.push_back(batch.step({{id, t}}).at(id));
         batch.remove(id);
         return torch::cat(outs);
       }},
  };
  std::vector<Tensor> expected;
  {
    torch::NoGradGuard no_grad;
    for (const auto& call : calls) expected.push_back(call.run());
  }
  std::atomic<int> mismatches{0}, errors{0};
  std::mutex first_mutex;
  std::string first_problem;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      torch::NoGradGuard no_grad;
      for (int i = 0; i < 10; ++i) {
        const size_t c = static_cast<size_t>(t + i) % calls.size();
        std::string problem;
        try {
          if (!mha::test::bitwise_equal(calls[c].run(), expected[c])) {
            ++mismatches;
            problem = calls[c].name + " differs on thread " + std::to_string(t);
          }
        } catch (const std::exception& e) {
          ++errors;
          problem = calls[c].name + " threw on thread " + std::to_string(t) + ": " + e.what();
        }
        const std::lock_guard<std::mutex> lock(first_mutex);
        if (first_problem.empty()) first_problem = problem;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(errors.load(), 0) << first_problem;
  EXPECT_EQ(mismatches.load(), 0) << first_problem;
  EXPECT_TRUE(batch.ids().empty());
  EXPECT_EQ(batch.used_bytes(), 0);
}

/// `draws` values from the global generator, one `torch::rand` at a time,
/// after seeding it with `seed`.
Tensor draw_sequence(uint64_t seed, int draws) {
  torch::manual_seed(seed);
  std::vector<Tensor> values;
  for (int i = 0; i < draws; ++i) values.push_back(torch::rand({4}));
  return torch::cat(values);
}

TEST_F(Concurrency, ClonesBesideADrawingThreadLeaveItsDrawsAlone) {
  ASSERT_TRUE(mha::detail::draws_intercepted());
  // What the modules hold: mha's own init (xavier uniform and normal),
  // LibTorch's Linear (kaiming) and Embedding (normal), at E = 512.
  MultiheadAttention attention(MultiheadAttentionOptions(512, 8).add_bias_kv(true));
  mha::TransformerEncoderLayer layer(mha::TransformerEncoderLayerOptions(512, 8));
  mha::CausalLM model(mha::CausalLMOptions("gpt2", mha::TransformerLayerOptions(64, 4), 1)
                          .vocab_size(1000)
                          .max_position_embeddings(64));
  constexpr int kClones = 200, kDraws = 20000;
  const Tensor alone = draw_sequence(7, kDraws);

  // The drawer repeats the seeded sequence until the clones are done, so
  // the clones overlap its draws however the threads are scheduled.
  std::atomic<bool> started{false}, cloned{false};
  std::atomic<int> rounds{0}, differing{0};
  std::thread drawer([&] {
    started = true;
    do {
      if (!mha::test::bitwise_equal(draw_sequence(7, kDraws), alone)) ++differing;
      ++rounds;
    } while (!cloned);
  });
  while (!started) std::this_thread::yield();
  for (int i = 0; i < kClones; ++i) {
    const auto a = attention->clone();
    const auto l = layer->clone();
    const auto m = model->clone();
  }
  cloned = true;
  drawer.join();
  EXPECT_GE(rounds.load(), 1);
  EXPECT_EQ(differing.load(), 0) << "of " << rounds.load()
                                 << " rounds of the same seed's draws beside the clones";
}

TEST_F(Concurrency, EachCallOfTheParallelLoopRunsEachItemOnce) {
  const int threads = at::get_num_threads();
  at::set_num_threads(2);  // at least one pool thread, on any machine
  constexpr int64_t kItems = 37, kCalls = 300;
  std::atomic<int64_t> wrong_calls{0};
  auto caller = [&] {
    for (int64_t call = 0; call < kCalls; ++call) {
      std::vector<std::atomic<int>> runs(kItems);
      mha::detail::parallel_items(
          kItems,
          [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) ++runs[i];
          },
          /*chunks_per_thread=*/4);
      for (const auto& r : runs) {
        if (r.load() != 1) {
          ++wrong_calls;
          break;
        }
      }
    }
  };
  caller();  // one caller: each call offered to the thread the last one woke
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) callers.emplace_back(caller);
  for (auto& t : callers) t.join();
  at::set_num_threads(threads);
  EXPECT_EQ(wrong_calls.load(), 0);
  // an item's exception reaches its caller, and the next call works
  EXPECT_THROW(mha::detail::parallel_items(
                   kItems, [](int64_t, int64_t) { TORCH_CHECK(false, "an item failed"); }, 4),
               c10::Error);
}

}  // namespace
