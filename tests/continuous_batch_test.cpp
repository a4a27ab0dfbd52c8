// mha::ContinuousBatch (mha/batching.h): requests with memories of different
// lengths arriving at random steps, teacher-forced (the same inputs for every
// way of decoding, so a near-tie cannot cascade), each request's outputs
// against the decoder's forward_cached of that request alone; admission and
// step errors that change no request.

#include <gtest/gtest.h>
#include <mha/batching.h>
#include <mha/mha.h>
#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <random>
#include <vector>

#include "serving/source_encoding.h"
#include "support.h"

namespace {

using mha::test::tensors_close;
using torch::Tensor;

constexpr int64_t kE = 32;

mha::TransformerDecoder make_decoder(bool norm_first) {
  torch::manual_seed(0);
  mha::TransformerDecoder decoder(mha::TransformerDecoderOptions(
      mha::TransformerDecoderLayer(
          mha::TransformerDecoderLayerOptions(kE, 4).dim_feedforward(64).dropout(0.0).norm_first(
              norm_first)),
      2));
  decoder->eval();
  return decoder;
}

/// One request: its memory (S, E) and its inputs, a prompt then single tokens.
struct Request {
  Tensor memory;
  std::vector<Tensor> inputs;  // (L, E) per step of the request
};

std::vector<Request> make_requests(int count) {
  std::vector<Request> requests;
  for (int r = 0; r < count; ++r) {
    Request request{torch::randn({3 + 2 * r, kE}), {torch::randn({1 + r % 3, kE})}};
    for (int step = 0; step < 4 + r % 2; ++step) request.inputs.push_back(torch::randn({1, kE}));
    requests.push_back(std::move(request));
  }
  return requests;
}

/// The request decoded alone: forward_cached with a batch of one, step by step.
std::vector<Tensor> alone(mha::TransformerDecoder& decoder, const Request& request) {
  auto cache = decoder->make_cache();
  std::vector<Tensor> outputs;
  const Tensor memory = request.memory.unsqueeze(1);  // (S, 1, E)
  for (const auto& x : request.inputs) {
    outputs.push_back(decoder->forward_cached(x.unsqueeze(1), memory, cache).squeeze(1));
  }
  return outputs;
}

class ContinuousBatching : public ::testing::TestWithParam<bool> {};

TEST_P(ContinuousBatching, EachRequestEqualsItsDecodingAloneWhateverItsNeighbours) {
  auto decoder = make_decoder(GetParam());
  const auto requests = make_requests(5);
  torch::NoGradGuard no_grad;
  std::vector<std::vector<Tensor>> expected;
  for (const auto& r : requests) expected.push_back(alone(decoder, r));

  mha::ContinuousBatch batch(decoder, mha::ContinuousBatchOptions().block_size(4).num_blocks(32));
  std::mt19937 random(7);
  std::map<int64_t, size_t> active;     // batch id -> request
  std::map<size_t, size_t> next_input;  // request -> its next step
  size_t arrived = 0, checked = 0;
  while (arrived < requests.size() || !active.empty()) {
    if (arrived < requests.size() && random() % 2 == 0) {  // an arrival, at a random step
      active[batch.add(requests[arrived].memory)] = arrived;
      next_input[arrived++] = 0;
    }
    std::map<int64_t, Tensor> inputs;
    for (const auto& [id, r] : active) {
      if (random() % 4 != 0) inputs[id] = requests[r].inputs[next_input[r]];  // some wait
    }
    for (const auto& [id, out] : batch.step(inputs)) {
      const size_t r = active[id];
      EXPECT_TRUE(tensors_close(out, expected[r][next_input[r]], 1e-5, 1e-5))
          << "request " << r << ", step " << next_input[r];
      ++checked;
      if (++next_input[r] == requests[r].inputs.size()) {
        batch.remove(id);
        active.erase(id);
      }
    }
  }
  size_t steps = 0;
  for (const auto& r : requests) steps += r.inputs.size();
  EXPECT_EQ(checked, steps);  // every step of every request
  EXPECT_EQ(batch.num_free_blocks(), 32);
  EXPECT_EQ(batch.used_bytes(), 0);
}

INSTANTIATE_TEST_SUITE_P(PostAndPreNorm, ContinuousBatching, ::testing::Bool());

/// Each request alone in its own batch, then all together with random
/// arrivals, in batch-invariant mode: the same bits, step for step.
TEST(ContinuousBatchingInvariance, ARequestsOutputsAreBitwiseItsOutputsAlone) {
  auto decoder = make_decoder(false);
  const auto requests = make_requests(5);
  const auto options =
      mha::ContinuousBatchOptions().block_size(4).num_blocks(64).batch_invariant(true);
  torch::NoGradGuard no_grad;
  std::vector<std::vector<Tensor>> expected;
  for (const auto& r : requests) {
    mha::ContinuousBatch alone(decoder, options);
    const int64_t id = alone.add(r.memory);
    expected.emplace_back();
    for (const auto& x : r.inputs) expected.back().push_back(alone.step({{id, x}}).at(id).clone());
  }
  mha::ContinuousBatch batch(decoder, options);
  std::mt19937 random(11);
  std::map<int64_t, size_t> active, next_input;
  size_t arrived = 0, bitwise = 0, steps = 0;
  for (const auto& r : requests) steps += r.inputs.size();
  while (arrived < requests.size() || !active.empty()) {
    if (arrived < requests.size() && random() % 2 == 0) {
      active[batch.add(requests[arrived].memory)] = arrived;
      ++arrived;
    }
    std::map<int64_t, Tensor> inputs;
    for (const auto& [id, r] : active) {
      if (random() % 4 != 0) inputs[id] = requests[r].inputs[next_input[r]];
    }
    for (const auto& [id, out] : batch.step(inputs)) {
      const size_t r = active[id];
      bitwise += mha::test::bitwise_equal(out, expected[r][next_input[r]]) ? 1 : 0;
      if (++next_input[r] == requests[r].inputs.size()) {
        batch.remove(id);
        active.erase(id);
      }
    }
  }
  EXPECT_EQ(bitwise, steps);
}

TEST(ContinuousBatchingFork, AForkContinuesItsParentAndThenGoesItsOwnWay) {
  auto decoder = make_decoder(false);
  const auto requests = make_requests(2);
  const Request& r = requests[1];  // a prompt of 2 positions, then single tokens
  torch::NoGradGuard no_grad;
  mha::ContinuousBatch batch(decoder, mha::ContinuousBatchOptions().block_size(4).num_blocks(16));
  const int64_t parent = batch.add(r.memory);
  batch.step({{parent, r.inputs[0]}});
  const int64_t free_before = batch.num_free_blocks();
  const int64_t child = batch.fork(parent);  // shares the prompt's block and the memory
  EXPECT_EQ(batch.num_free_blocks(), free_before);
  EXPECT_EQ(batch.length(child), batch.length(parent));
  // The child is fed the parent's next inputs: the request alone; the parent other ones.
  const std::vector<Tensor> expected = alone(decoder, r);
  for (size_t i = 1; i < r.inputs.size(); ++i) {
    const auto out = batch.step({{child, r.inputs[i]}, {parent, torch::randn({1, kE})}});
    EXPECT_TRUE(tensors_close(out.at(child), expected[i], 1e-5, 1e-5)) << "step " << i;
  }
  batch.remove(parent);
  batch.remove(child);
  EXPECT_EQ(batch.num_free_blocks(), 16);
  MHA_ASSERT_THROWS_WITH(batch.fork(parent), "ContinuousBatch::fork: unknown request id");
}

TEST(ContinuousBatchingInvariance, IsRefusedForInt8Weights) {
  auto decoder = make_decoder(false);
  mha::quantize_dynamic(decoder);
  MHA_ASSERT_THROWS_WITH(
      mha::ContinuousBatch(decoder, mha::ContinuousBatchOptions().batch_invariant(true)),
      "batch_invariant needs float weights");
}

/// A ContinuousBatch made from a Transformer steps the model's own decoder:
/// bitwise the batch over that decoder unwrapped by hand.
TEST(ContinuousBatchingFromATransformer, EqualsTheBatchOverItsDecoderUnwrappedByHand) {
  torch::manual_seed(0);
  mha::Transformer model(mha::TransformerOptions(kE, 4, 1, 2).dim_feedforward(64).dropout(0.0));
  model->eval();
  const auto requests = make_requests(3);
  const auto options = mha::ContinuousBatchOptions().block_size(4).num_blocks(32);
  torch::NoGradGuard no_grad;
  mha::ContinuousBatch from_model(model, options);
  mha::ContinuousBatch by_hand(
      mha::TransformerDecoder(model->decoder.ptr<mha::TransformerDecoderImpl>()), options);
  std::map<int64_t, size_t> active;  // the same ids in both batches
  for (size_t r = 0; r < requests.size(); ++r) {
    const Tensor memory = model->encode(requests[r].memory);  // the source (S, E) -> (S, E)
    const int64_t id = from_model.add(memory);
    ASSERT_EQ(by_hand.add(memory), id);
    active[id] = r;
  }
  size_t bitwise = 0, steps = 0;
  for (size_t step = 0; step < 4; ++step) {  // every request has at least 5 inputs
    std::map<int64_t, Tensor> inputs;
    for (const auto& [id, r] : active) inputs[id] = requests[r].inputs[step];
    const auto expected = by_hand.step(inputs);
    for (const auto& [id, out] : from_model.step(inputs)) {
      bitwise += mha::test::bitwise_equal(out, expected.at(id)) ? 1 : 0;
      ++steps;
    }
  }
  EXPECT_EQ(steps, 4 * requests.size());
  EXPECT_EQ(bitwise, steps);
}

/// The sources of one add_sources call, encoded together (without masks:
/// packed as rows in one forward_packed call; with one source's own padding
/// mask: grouped by length, {9, 7} and {5, 3} positions, each group padded),
/// against each source encoded alone and add()ed: within float32 rounding,
/// bitwise with batch_invariant (one call each).
TEST(ContinuousBatchingFromATransformer, SourcesEncodedTogetherEqualSourcesEncodedAlone) {
  for (const auto& [invariant, masked] : std::vector<std::pair<bool, bool>>{
           {false, false}, {false, true}, {true, false}, {true, true}}) {
    SCOPED_TRACE(std::string(invariant ? "batch_invariant" : "") + (masked ? " masked" : ""));
    torch::manual_seed(0);
    mha::Transformer model(mha::TransformerOptions(kE, 4, 2, 2).dim_feedforward(64).dropout(0.0));
    model->eval();
    const auto requests = make_requests(4);  // their memories are the sources here
    std::vector<Tensor> sources, masks;
    for (const auto& r : requests) {
      sources.push_back(r.memory);  // (S_i, E): 3, 5, 7, 9 positions
      masks.push_back(Tensor());
    }
    if (masked) masks[2] = torch::tensor({false, false, false, false, false, true, true});
    const auto options =
        mha::ContinuousBatchOptions().block_size(4).num_blocks(32).batch_invariant(invariant);
    torch::NoGradGuard no_grad;
    mha::ContinuousBatch together(model, options), alone(model, options);
    std::vector<int64_t> ids;
    const auto ops = mha::test::ops_called([&] { ids = together.add_sources(sources, masks); });
    // Without masks nor batch_invariant, each GEMM once over all the sources'
    // rows: per encoder layer q, k, v, out_proj, linear1, linear2 (float
    // weights), per decoder layer the memory's keys and values.
    if (!invariant && !masked) {
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "aten::linear"), 2 * 6 + 2 * 2);
    }
    for (size_t i = 0; i < sources.size(); ++i) {
      const Tensor mask = masks[i].defined() ? masks[i].unsqueeze(0) : Tensor();          // (1, S)
      const Tensor memory = model->encode(sources[i].unsqueeze(1), {}, mask).squeeze(1);  // (S, E)
      ASSERT_EQ(alone.add(memory, masks[i]), ids[i]);
    }
    size_t bitwise = 0, close = 0;
    for (size_t step = 0; step < 4; ++step) {
      std::map<int64_t, Tensor> inputs;
      for (size_t i = 0; i < ids.size(); ++i) inputs[ids[i]] = requests[i].inputs[step];
      const auto expected = alone.step(inputs);
      for (const auto& [id, out] : together.step(inputs)) {
        bitwise += mha::test::bitwise_equal(out, expected.at(id)) ? 1 : 0;
        close += tensors_close(out, expected.at(id), 1e-5, 1e-5) ? 1 : 0;
      }
    }
    EXPECT_EQ(close, 4 * ids.size()) << "batch_invariant " << invariant;
    if (invariant) {
      EXPECT_EQ(bitwise, 4 * ids.size());
    }
  }
}

TEST(ContinuousBatchingFromATransformer, SourcesAreEncodedInGroupsOfSimilarLengths) {
  using mha::detail::length_groups;
  const auto of_lengths = [](const std::vector<int64_t>& lengths) {
    std::vector<Tensor> sources;
    for (const int64_t length : lengths) sources.push_back(torch::zeros({length, 2}));
    return sources;
  };
  using Groups = std::vector<std::vector<size_t>>;
  EXPECT_EQ(length_groups(of_lengths({3, 5, 7, 9})), (Groups{{3, 2}, {1, 0}}));
  EXPECT_EQ(length_groups(of_lengths({4, 4, 4})), (Groups{{0, 1, 2}}));
  // A serving admission: 48 sources of 16-128 positions.
  std::mt19937 random(0);
  std::vector<int64_t> lengths;
  for (int i = 0; i < 48; ++i) lengths.push_back(16 + static_cast<int64_t>(random() % 113));
  const auto sources = of_lengths(lengths);
  const Groups groups = length_groups(sources);
  EXPECT_GE(groups.size(), 3u);  // docs/decoding.md: 3-4 calls, ~1.2x the real positions
  EXPECT_LE(groups.size(), 4u);
  std::vector<size_t> seen;
  int64_t all_real = 0, all_padded = 0;
  for (const auto& group : groups) {
    int64_t real = 0;
    for (const size_t i : group) real += lengths[i];
    const int64_t padded = static_cast<int64_t>(group.size()) * lengths[group.front()];
    EXPECT_LE(padded, 1.25 * real);
    all_real += real;
    all_padded += padded;
    seen.insert(seen.end(), group.begin(), group.end());
  }
  const int64_t one_call = 48 * *std::max_element(lengths.begin(), lengths.end());
  std::cout << "48 sources: " << groups.size() << " groups, padded / real "
            << static_cast<double>(all_padded) / all_real << "; one call "
            << static_cast<double>(one_call) / all_real << "\n";
  EXPECT_LE(all_padded, 1.25 * all_real);
  EXPECT_GE(one_call, 1.5 * all_real);  // one call padded to the longest: ~1.9x
  std::sort(seen.begin(), seen.end());
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i);  // each source once
}

TEST(ContinuousBatchingFromATransformer, AddSourcesIsAllOrNone) {
  torch::manual_seed(0);
  mha::Transformer model(mha::TransformerOptions(kE, 4, 1, 1).dim_feedforward(64).dropout(0.0));
  model->eval();
  mha::ContinuousBatch batch(
      model, mha::ContinuousBatchOptions().block_size(4).num_blocks(8).num_memory_blocks(3));
  torch::NoGradGuard no_grad;
  MHA_ASSERT_THROWS_WITH(batch.add_sources({torch::randn({5, kE}), torch::randn({5, kE})}),
                         "cannot admit the 2 requests: their memories need 4 blocks per layer, "
                         "and 3 are free");
  MHA_ASSERT_THROWS_WITH(batch.add_sources({torch::randn({5, kE}), torch::randn({4, kE + 1})}),
                         "expected sources[1] of shape (rows, 32)");
  MHA_ASSERT_THROWS_WITH(batch.add_sources({torch::randn({2, kE})}, {torch::tensor({true, true})}),
                         "expected sources[0] of at least one unmasked position");
  MHA_ASSERT_THROWS_WITH(batch.add_sources({torch::randn({2, kE})}, {Tensor(), Tensor()}),
                         "expected no src_key_padding_masks or one per source (1), but got 2");
  EXPECT_TRUE(batch.ids().empty());
  EXPECT_EQ(batch.used_bytes(), 0);
  EXPECT_EQ(batch.add_sources({torch::randn({5, kE}), torch::randn({3, kE})}).size(), 2u);
  mha::ContinuousBatch from_a_stack(
      mha::TransformerDecoder(model->decoder.ptr<mha::TransformerDecoderImpl>()));
  MHA_ASSERT_THROWS_WITH(from_a_stack.add_sources({torch::randn({5, kE})}),
                         "ContinuousBatch::add_sources: expected a batch made from an "
                         "mha::Transformer");
}

TEST(ContinuousBatchingFromATransformer, RefusesACustomDecoderOfAnotherType) {
  mha::Transformer model(mha::TransformerOptions(kE, 4, 1, 1)
                             .custom_decoder(torch::nn::AnyModule(torch::nn::Linear(kE, kE))));
  model->eval();
  MHA_ASSERT_THROWS_WITH(mha::ContinuousBatch{model},
                         "ContinuousBatch: expected the Transformer's decoder to be a "
                         "mha::TransformerDecoder, but it is torch::nn::LinearImpl");
  MHA_ASSERT_THROWS_WITH(mha::ContinuousBatch{mha::Transformer(nullptr)},
                         "ContinuousBatch: expected a Transformer, not nullptr");
}

mha::TransformerEncoder make_causal_stack() {
  torch::manual_seed(0);
  mha::TransformerEncoder stack(
      mha::TransformerEncoderOptions(
          mha::TransformerEncoderLayer(
              mha::TransformerEncoderLayerOptions(kE, 4).dim_feedforward(64).dropout(0.0)),
          2)
          .enable_nested_tensor(false));
  stack->eval();
  return stack;
}

TEST(ContinuousBatchingDecoderOnly, CachedChunksEqualTheCausalForward) {
  auto stack = make_causal_stack();
  torch::NoGradGuard no_grad;
  const Tensor x = torch::randn({6, 2, kE});  // (L, N, E)
  const Tensor expected =
      stack->forward(x, mha::TransformerImpl::generate_square_subsequent_mask(6));
  auto cache = stack->make_cache();
  std::vector<Tensor> chunks;
  for (const auto& [start, length] :
       std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 1}, {4, 2}}) {
    chunks.push_back(stack->forward_cached(x.narrow(0, start, length), cache));
  }
  EXPECT_TRUE(tensors_close(torch::cat(chunks), expected, 1e-5, 1e-5));
}

TEST(ContinuousBatchingDecoderOnly, EachRequestEqualsItsDecodingAlone) {
  auto stack = make_causal_stack();
  const auto requests = make_requests(4);  // their memories unused: decoder-only
  torch::NoGradGuard no_grad;
  mha::ContinuousBatch batch(stack, mha::ContinuousBatchOptions().block_size(4).num_blocks(32));
  std::vector<std::vector<Tensor>> expected;
  for (const auto& r : requests) {
    auto cache = stack->make_cache();
    expected.emplace_back();
    for (const auto& x : r.inputs) {
      expected.back().push_back(stack->forward_cached(x.unsqueeze(1), cache).squeeze(1));
    }
  }
  std::map<int64_t, size_t> active, next_input;
  size_t checked = 0, steps = 0;
  for (const auto& r : requests) steps += r.inputs.size();
  for (size_t r = 0; r < requests.size() || !active.empty();) {
    if (r < requests.size()) active[batch.add()] = r++;  // one arrival per step
    std::map<int64_t, Tensor> inputs;
    for (const auto& [id, request] : active)
      inputs[id] = requests[request].inputs[next_input[request]];
    for (const auto& [id, out] : batch.step(inputs)) {
      const size_t request = active[id];
      EXPECT_TRUE(tensors_close(out, expected[request][next_input[request]], 1e-5, 1e-5));
      ++checked;
      if (++next_input[request] == requests[request].inputs.size()) {
        batch.remove(id);
        active.erase(id);
      }
    }
  }
  EXPECT_EQ(checked, steps);
  MHA_ASSERT_THROWS_WITH(batch.add(torch::randn({3, kE})),
                         "a decoder-only stack's requests have none");
}

/// The packed step (rows (T, E), ids, lengths) is the map form's step: two
/// batches of the same requests, one stepped each way, give the same bits;
/// its own bad input throws and changes no request.
TEST(ContinuousBatchingPacked, ThePackedStepIsTheMapStep) {
  auto decoder = make_decoder(false);
  const auto requests = make_requests(3);
  torch::NoGradGuard no_grad;
  const auto options = mha::ContinuousBatchOptions().block_size(4).num_blocks(64);
  mha::ContinuousBatch by_map(decoder, options), packed(decoder, options);
  std::vector<int64_t> ids;
  for (const auto& r : requests) {
    ids.push_back(by_map.add(r.memory));
    EXPECT_EQ(packed.add(r.memory), ids.back());
  }
  for (size_t step = 0; step < 4; ++step) {
    std::map<int64_t, Tensor> inputs;
    std::vector<Tensor> rows;
    std::vector<int64_t> lengths;
    for (size_t r = 0; r < requests.size(); ++r) {
      inputs[ids[r]] = requests[r].inputs[step];
      rows.push_back(requests[r].inputs[step]);
      lengths.push_back(requests[r].inputs[step].size(0));
    }
    const auto expected = by_map.step(inputs);
    const Tensor out = packed.step(torch::cat(rows), ids, lengths);  // (T, E)
    int64_t begin = 0;
    for (size_t r = 0; r < requests.size(); ++r) {
      EXPECT_TRUE(mha::test::bitwise_equal(out.narrow(0, begin, lengths[r]), expected.at(ids[r])))
          << "request " << r << ", step " << step;
      begin += lengths[r];
    }
  }
  const Tensor two = torch::randn({2, kE});
  MHA_ASSERT_THROWS_WITH(packed.step(two, {ids[0], ids[1]}, {1}),
                         "expected one length per id (2), but got 1 lengths");
  MHA_ASSERT_THROWS_WITH(packed.step(two, {ids[0]}, {3}),
                         "expected rows of 3 positions (the sum of lengths), but got 2");
  MHA_ASSERT_THROWS_WITH(packed.step(two, {ids[0], ids[0]}, {1, 1}),
                         "expected distinct sequence ids");
  MHA_ASSERT_THROWS_WITH(packed.step(two, {ids[0], 99}, {1, 1}), "unknown request id 99");
  for (const int64_t id : ids) EXPECT_EQ(packed.length(id), by_map.length(id));
}

TEST(ContinuousBatchingErrors, AFailedAddOrStepChangesNoRequest) {
  auto decoder = make_decoder(false);
  mha::ContinuousBatch batch(
      decoder, mha::ContinuousBatchOptions().block_size(4).num_blocks(2).num_memory_blocks(3));
  torch::NoGradGuard no_grad;
  const int64_t a = batch.add(torch::randn({8, kE}));  // 2 of the 3 memory blocks
  MHA_ASSERT_THROWS_WITH(batch.add(torch::randn({5, kE})),
                         "cannot admit the request: its memory of 5 positions needs 2 blocks per "
                         "layer, and 1 are free");
  MHA_ASSERT_THROWS_WITH(batch.add(torch::randn({5, kE + 1})),
                         "expected memory of shape (rows, 32)");
  const auto masked = torch::tensor({false, true, true, true, true});
  const int64_t b = batch.add(torch::randn({5, kE}), masked);  // one unmasked position
  EXPECT_EQ(batch.ids(), (std::vector<int64_t>{a, b}));
  batch.step({{a, torch::randn({3, kE})}});
  const auto before = batch.num_free_blocks();
  MHA_ASSERT_THROWS_WITH(batch.step({{a, torch::randn({2, kE})}, {b, torch::randn({6, kE})}}),
                         "ContinuousBatch::step: remove() finished requests");
  MHA_ASSERT_THROWS_WITH(batch.step({{a, torch::randn({1, kE})}, {9, torch::randn({1, kE})}}),
                         "ContinuousBatch::step: unknown request id 9");
  MHA_ASSERT_THROWS_WITH(batch.step({{a, torch::randn({1, kE}, torch::kDouble)}}),
                         "expected inputs[0] of dtype Float");
  EXPECT_EQ(batch.length(a), 3);
  EXPECT_EQ(batch.length(b), 0);
  EXPECT_EQ(batch.num_free_blocks(), before);
  MHA_ASSERT_THROWS_WITH(batch.remove(9), "ContinuousBatch::remove: unknown request id 9");
}

}  // namespace
