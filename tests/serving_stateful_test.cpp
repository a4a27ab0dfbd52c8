// Randomized stateful tests of the paged cache and of ContinuousBatch: a long
// random sequence of calls (adds, forks, steps, releases, and calls that must
// fail: unknown or repeated ids, more positions than the free blocks hold),
// checked after every call against a model of the block pool (free blocks,
// copy on write, lengths) and each request's outputs against the request
// decoded alone. MHA_STATEFUL_OPS sets the number of calls (CI: 300 each; a
// long run: MHA_STATEFUL_OPS=20000).

#include <gtest/gtest.h>
#include <mha/batching.h>
#include <mha/mha.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <vector>

#include "support.h"

namespace {

using mha::test::tensors_close;
using torch::Tensor;

constexpr int64_t kE = 64, kHeads = 4, kBlockSize = 4, kBlocks = 24;

int operations() {
  const char* value = std::getenv("MHA_STATEFUL_OPS");
  return value != nullptr ? std::atoi(value) : 300;
}

/// The pool as the cache's contract describes it: block lists with shared
/// holders, copy on write of a shared partly filled tail, a free count.
struct PoolModel {
  struct Sequence {
    std::vector<int> blocks;
    int64_t length = 0;
    std::vector<Tensor> rows;  // every input row so far, (1, E) each
  };
  std::map<int64_t, Sequence> sequences;
  std::map<int, int> holders;  // block -> sequences holding it
  int next_block = 0, free = kBlocks;

  int take() {
    --free;
    holders[next_block] = 1;
    return next_block++;
  }
  void drop(int block) {
    if (--holders[block] == 0) {
      holders.erase(block);
      ++free;
    }
  }
  /// Blocks a step of `positions` new rows per id takes, grow() order.
  int64_t needed(const std::vector<int64_t>& ids, const std::vector<int64_t>& positions) const {
    std::map<int, int> tail_holders;
    int64_t n = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const Sequence& s = sequences.at(ids[i]);
      if (positions[i] == 0) continue;
      n += (s.length + positions[i] + kBlockSize - 1) / kBlockSize -
           static_cast<int64_t>(s.blocks.size());
      if (s.length % kBlockSize != 0) {
        int& h = tail_holders.emplace(s.blocks.back(), holders.at(s.blocks.back())).first->second;
        if (h > 1) {
          ++n;
          --h;
        }
      }
    }
    return n;
  }
  void grow(int64_t id, int64_t positions) {
    Sequence& s = sequences.at(id);
    if (positions > 0 && s.length % kBlockSize != 0 && holders.at(s.blocks.back()) > 1) {
      const int own = take();
      drop(s.blocks.back());
      s.blocks.back() = own;
    }
    s.length += positions;
    while (static_cast<int64_t>(s.blocks.size()) * kBlockSize < s.length)
      s.blocks.push_back(take());
  }
};

Tensor offsets(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> cu{0};
  for (const int64_t l : lengths) cu.push_back(cu.back() + l);
  return torch::tensor(cu, torch::kLong);
}

/// The last `n` outputs of a sequence's rows decoded alone in one causal call.
Tensor decoded_alone(mha::MultiheadAttention& attn, const std::vector<Tensor>& rows, int64_t n) {
  auto cache = mha::KVCache::self_attention();
  const Tensor x = torch::cat(rows).unsqueeze(0);  // (1, L, E)
  const Tensor out = std::get<0>(attn->forward_cached(x, x, x, cache)).squeeze(0);
  return out.narrow(0, out.size(0) - n, n);
}

TEST(ServingStateful, PagedCacheFollowsItsModelThroughRandomCalls) {
  torch::manual_seed(0);
  mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(kE, kHeads).batch_first(true));
  attn->eval();
  mha::PagedKVCache cache(*attn, mha::PagedKVCacheOptions(kBlocks, kBlockSize));
  PoolModel model;
  std::mt19937 rng(1);
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  torch::NoGradGuard no_grad;
  int failures = 0, steps = 0;
  for (int op = 0; op < operations(); ++op) {
    std::vector<int64_t> live;
    for (const auto& entry : model.sequences) live.push_back(entry.first);
    const size_t kind = live.empty() ? 0 : pick(10);
    if (kind == 0 && live.size() < 8) {  // add
      model.sequences[cache.add_sequence()];
    } else if (kind == 1) {  // fork: shares every block
      const int64_t parent = live[pick(live.size())];
      const int64_t child = cache.fork(parent);
      model.sequences[child] = model.sequences.at(parent);
      for (const int block : model.sequences[child].blocks) ++model.holders[block];
    } else if (kind == 2 || (kind == 0 && !live.empty())) {  // release
      const int64_t id = live[pick(live.size())];
      cache.release(id);
      for (const int block : model.sequences.at(id).blocks) model.drop(block);
      model.sequences.erase(id);
    } else if (kind == 3) {  // bad ids: an error that changes nothing
      const Tensor x = torch::randn({2, kE});
      const int64_t id = live[pick(live.size())];
      EXPECT_THROW(attn->forward_paged(x, x, x, cache, {id, id}, offsets({1, 1})), c10::Error);
      EXPECT_THROW(attn->forward_paged(x, x, x, cache, {id, 1000000}, offsets({1, 1})), c10::Error);
    } else {  // a step of some sequences, 1-5 new rows each
      std::shuffle(live.begin(), live.end(), rng);
      std::vector<int64_t> ids(live.begin(),
                               live.begin() + 1 + pick(std::min<size_t>(4, live.size())));
      std::vector<int64_t> lengths;
      for (size_t i = 0; i < ids.size(); ++i) lengths.push_back(1 + static_cast<int64_t>(pick(5)));
      const Tensor x = torch::randn({offsets(lengths)[-1].item<int64_t>(), kE});
      if (model.needed(ids, lengths) > model.free) {
        EXPECT_THROW(attn->forward_paged(x, x, x, cache, ids, offsets(lengths)), c10::Error);
        ++failures;
      } else {
        const Tensor out = std::get<0>(attn->forward_paged(x, x, x, cache, ids, offsets(lengths)));
        for (size_t i = 0, row = 0; i < ids.size(); row += lengths[i], ++i) {
          PoolModel::Sequence& s = model.sequences.at(ids[i]);
          for (int64_t r = 0; r < lengths[i]; ++r) s.rows.push_back(x.narrow(0, row + r, 1));
          model.grow(ids[i], lengths[i]);
          ASSERT_TRUE(tensors_close(out.narrow(0, row, lengths[i]),
                                    decoded_alone(attn, s.rows, lengths[i]), 1e-5, 1e-5))
              << "call " << op << ", sequence " << ids[i];
        }
        ++steps;
      }
    }
    ASSERT_EQ(cache.num_free_blocks(), model.free) << "after call " << op;
    for (const auto& [id, s] : model.sequences) ASSERT_EQ(cache.length(id), s.length);
  }
  EXPECT_GT(steps, 0);
  EXPECT_GT(failures, 0);  // the run reached "out of blocks"
  for (const auto& entry : model.sequences) cache.release(entry.first);
  EXPECT_EQ(cache.num_free_blocks(), kBlocks);
}

TEST(ServingStateful, ContinuousBatchServesEachRequestAsAloneThroughRandomCalls) {
  torch::manual_seed(0);
  mha::TransformerEncoder stack(
      mha::TransformerEncoderOptions(
          mha::TransformerEncoderLayer(
              mha::TransformerEncoderLayerOptions(kE, kHeads).dim_feedforward(128).dropout(0.0)),
          2)
          .enable_nested_tensor(false));
  stack->eval();
  mha::ContinuousBatch batch(
      stack, mha::ContinuousBatchOptions().block_size(kBlockSize).num_blocks(kBlocks));
  std::map<int64_t, mha::TransformerEncoderCache> alone;  // each request decoded alone
  std::mt19937 rng(2);
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  torch::NoGradGuard no_grad;
  int failures = 0;
  for (int op = 0; op < operations(); ++op) {
    std::vector<int64_t> live = batch.ids();
    const size_t kind = live.empty() ? 0 : pick(8);
    if (kind == 0 && live.size() < 6) {
      alone.emplace(batch.add(), stack->make_cache());
    } else if (kind <= 1) {
      const int64_t id = live[pick(live.size())];
      batch.remove(id);
      alone.erase(id);
    } else if (kind == 2) {
      EXPECT_THROW(batch.step({{1000000, torch::randn({1, kE})}}), c10::Error);
    } else {
      std::map<int64_t, Tensor> inputs;
      for (const int64_t id : live) {
        if (pick(3) != 0) inputs[id] = torch::randn({1 + static_cast<int64_t>(pick(6)), kE});
      }
      std::map<int64_t, int64_t> before;
      for (const int64_t id : live) before[id] = batch.length(id);
      try {
        const auto outputs = batch.step(inputs);
        for (const auto& [id, out] : outputs) {
          const Tensor expected = stack->forward_cached(inputs.at(id).unsqueeze(1), alone.at(id));
          ASSERT_TRUE(tensors_close(out, expected.squeeze(1), 1e-5, 1e-5))
              << "call " << op << ", request " << id;
        }
      } catch (const c10::Error& e) {
        ASSERT_NE(std::string(e.what()).find("out of blocks"), std::string::npos) << e.what();
        for (const int64_t id : live) ASSERT_EQ(batch.length(id), before[id]);
        ++failures;
      }
    }
  }
  EXPECT_GT(failures, 0);
  for (const int64_t id : batch.ids()) batch.remove(id);
  EXPECT_EQ(batch.used_bytes(), 0);
  EXPECT_EQ(batch.num_free_blocks(), kBlocks);
}

}  // namespace
