// mha::KVCache and forward_cached: decoding token by token, in chunks and with
// a beam reorder reproduces Python's full forward (references written by
// scripts/export_decoding_reference.py, a CTest fixture); bad calls name the
// argument and change nothing; a fixed-capacity cache allocates nothing per
// step that grows with the cached length.

#include <mha/kv_cache.h>
#include <mha/multihead_attention.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "counting_allocator.h"
#include "dtype_names.h"
#include "file_bytes.h"
#include "parity_report.h"
#include "support.h"
#include "tolerances.h"

namespace {

using mha::KVCache;
using mha::MultiheadAttention;
using torch::Tensor;

std::string reference_dir() {
  const char* dir = std::getenv("MHA_DECODING_REFERENCE_DIR");
  return dir ? dir : MHA_DEFAULT_DECODING_REFERENCE_DIR;
}

/// One file of export_decoding_reference.py.
struct DecodingCase {
  std::string name, kind, dtype;
  c10::impl::GenericDict dict{c10::StringType::get(), c10::AnyType::get()};

  c10::IValue at(const std::string& key) const { return dict.at(key); }
  Tensor input(const std::string& key) const {
    const auto inputs = at("inputs").toGenericDict();
    return inputs.contains(key) ? inputs.at(key).toTensor() : Tensor();
  }
  Tensor expected(const std::string& key) const {
    const auto expected = at("expected").toGenericDict();
    return expected.contains(key) ? expected.at(key).toTensor() : Tensor();
  }
  bool is_static() const { return kind == "static"; }
  bool batch_first() const { return options().at("batch_first").toBool(); }
  c10::impl::GenericDict options() const { return at("options").toGenericDict(); }
};

DecodingCase read_case(const std::string& name) {
  const std::string path = reference_dir() + "/" + name + ".pt";
  EXPECT_TRUE(std::ifstream(path))
      << path << " missing: run scripts/export_decoding_reference.py --out DIR";
  DecodingCase c;
  c.dict = torch::pickle_load(mha::support::read_file_bytes(path)).toGenericDict();
  c.name = c.at("name").toStringRef();
  c.kind = c.at("kind").toStringRef();
  c.dtype = c.at("dtype").toStringRef();
  return c;
}

MultiheadAttention make_module(const DecodingCase& c) {
  const auto o = c.options();
  auto optional = [](const c10::IValue& v) {
    return v.isNone() ? std::nullopt : std::optional<int64_t>(v.toInt());
  };
  MultiheadAttention m(
      mha::MultiheadAttentionOptions(o.at("embed_dim").toInt(), o.at("num_heads").toInt())
          .bias(o.at("bias").toBool())
          .add_bias_kv(o.at("add_bias_kv").toBool())
          .add_zero_attn(o.at("add_zero_attn").toBool())
          .kdim(optional(o.at("kdim")))
          .vdim(optional(o.at("vdim")))
          .batch_first(o.at("batch_first").toBool()));
  m->to(mha::support::dtype_from_name(c.dtype));
  auto params = m->named_parameters();
  torch::NoGradGuard no_grad;
  for (const auto& item : c.at("state_dict").toGenericDict()) {
    params[item.key().toStringRef()].copy_(item.value().toTensor());
  }
  m->eval();
  return m;
}

/// Positions compared and bitwise equal over the whole run.
struct Tally {
  int64_t positions = 0;
  int64_t bitwise = 0;
};
Tally tally;

/// Compares decoded positions [begin, begin + len) with the reference output.
void compare(const DecodingCase& c,
             const Tensor& actual,
             const Tensor& expected_full,
             int64_t begin,
             const std::string& where) {
  const bool batched = expected_full.dim() == 3;
  const int64_t seq = batched && c.batch_first() ? 1 : 0;
  const Tensor expected = expected_full.narrow(seq, begin, actual.size(seq));
  const auto tolerance = mha::support::parity_tolerance(expected.scalar_type());
  ASSERT_TRUE(mha::test::tensors_close(actual, expected, tolerance.rtol, tolerance.atol))
      << c.name << " " << where << " positions from " << begin;
  // (positions, N) vectors of E features each
  const Tensor same = (actual == expected).all(-1);
  tally.positions += same.numel();
  tally.bitwise += same.sum().item<int64_t>();
}

/// Averaged weights of the rows [t0, t0 + len): columns are the keys seen so
/// far, then the extra rows, which Python puts after all L (or S) keys.
void compare_weights(const DecodingCase& c,
                     const Tensor& weights,
                     int64_t t0,
                     const std::string& where) {
  const Tensor full = c.expected("weights");  // (N, L, S + extra)
  const int64_t len = weights.size(1), keys = c.is_static() ? weights.size(2) : t0 + len;
  const int64_t extra = weights.size(2) - keys, src = full.size(2) - extra;
  const Tensor rows = full.narrow(1, t0, len);
  const Tensor expected = torch::cat({rows.narrow(2, 0, keys), rows.narrow(2, src, extra)}, 2);
  const auto tolerance = mha::support::parity_tolerance(expected.scalar_type());
  ASSERT_TRUE(mha::test::tensors_close(weights, expected, tolerance.rtol, tolerance.atol))
      << c.name << " weights " << where << " rows from " << t0;
}

/// Decodes `x` in calls of the given lengths from position `begin`, comparing
/// each call's output with `expected`; masks and memory from the case.
void decode(MultiheadAttention& m,
            const DecodingCase& c,
            KVCache& cache,
            const Tensor& x,
            const Tensor& kpm,
            const Tensor& expected,
            int64_t begin,
            const std::vector<int64_t>& lengths,
            const std::string& where) {
  const bool batched = x.dim() == 3;
  const int64_t seq = batched && c.batch_first() ? 1 : 0;
  const bool weights = c.expected("weights").defined() && where == "chunks";
  int64_t t = begin;
  for (const int64_t len : lengths) {
    const Tensor xs = x.narrow(seq, t, len);
    Tensor out, w;
    if (c.is_static()) {
      const bool first = cache.length() == 0;
      const Tensor memory = first ? c.input("memory") : Tensor();
      const Tensor memory_value = first ? c.input("memory_value") : Tensor();
      std::tie(out, w) = m->forward_cached(xs, memory, memory_value, cache, kpm, weights);
    } else {
      const Tensor step_kpm = kpm.defined() ? kpm.narrow(-1, 0, t + len) : kpm;
      std::tie(out, w) = m->forward_cached(xs, xs, xs, cache, step_kpm, weights);
    }
    compare(c, out, expected, t, where);
    if (weights) compare_weights(c, w, t, where);
    t += len;
  }
}

std::vector<int64_t> steps(int64_t prompt, int64_t count) {
  std::vector<int64_t> lengths(count, 1);
  if (prompt > 0) lengths.insert(lengths.begin(), prompt);
  return lengths;
}

constexpr int64_t kPrompt = 37;

TEST(KVCacheParity, DecodesPythonsFullForward) {
  const auto names = mha::support::read_manifest(reference_dir());
  ASSERT_FALSE(names.empty()) << "no manifest in " << reference_dir();
  for (const auto& name : names) {
    const DecodingCase c = read_case(name);
    MultiheadAttention m = make_module(c);
    const Tensor x = c.input("x"), kpm = c.input("key_padding_mask");
    const Tensor expected = c.expected("output");
    const int64_t len = x.size(x.dim() == 3 && c.batch_first() ? 1 : 0);
    {  // token by token, under InferenceMode
      c10::InferenceMode inference;
      auto cache = c.is_static() ? KVCache::static_kv() : KVCache::self_attention();
      decode(m, c, cache, x, kpm, expected, 0, steps(0, len), "tokens");
    }
    {  // a prompt under InferenceMode, then single steps under NoGradGuard
      auto cache = c.is_static() ? KVCache::static_kv() : KVCache::self_attention(len);
      {
        c10::InferenceMode inference;
        decode(m, c, cache, x, kpm, expected, 0, {kPrompt}, "chunks");
      }
      torch::NoGradGuard no_grad;
      decode(m, c, cache, x, kpm, expected, kPrompt, steps(0, len - kPrompt), "chunks");
    }
    const Tensor index =
        c.dict.contains("reorder_index") ? c.at("reorder_index").toTensor() : Tensor();
    if (!index.defined()) continue;
    // Beam reorder in the middle, with grad mode on (forward_cached records no graph).
    const int64_t step = c.at("reorder_step").toInt();
    auto cache = c.is_static() ? KVCache::static_kv() : KVCache::self_attention();
    decode(m, c, cache, x, kpm, expected, 0, steps(kPrompt, step - kPrompt), "reorder");
    cache.reorder(index);
    ASSERT_EQ(cache.batch_size(), index.size(0));
    decode(m, c, cache, c.input("x_reordered"), c.input("key_padding_mask_reordered"),
           c.expected("output_reordered"), step, steps(0, len - step), "reorder");
  }
  std::cout << "decoding parity: " << tally.positions << " positions compared, " << tally.bitwise
            << " bitwise equal to Python\n";
}

// ---------------------------------------------------------------------------
// API behaviour, bad input, memory.

struct KVCacheTest : mha::test::SeedingFixture {};

MultiheadAttention eval_module(mha::MultiheadAttentionOptions options) {
  MultiheadAttention m(options);
  m->eval();
  return m;
}

TEST_F(KVCacheTest, GrowsByDoublingAndReportsMemory) {
  auto m = eval_module(mha::MultiheadAttentionOptions(16, 2).add_bias_kv(true).add_zero_attn(true));
  auto cache = KVCache::self_attention();
  EXPECT_EQ(cache.capacity(), 0);
  EXPECT_EQ(cache.memory_bytes(), 0);
  const Tensor x = torch::randn({20, 3, 16});
  m->forward_cached(x, x, x, cache);
  EXPECT_EQ(cache.length(), 20);
  EXPECT_EQ(cache.capacity(), 20);  // max(20, 16)
  const Tensor y = torch::randn({1, 3, 16});
  m->forward_cached(y, y, y, cache);
  EXPECT_EQ(cache.capacity(), 40);  // doubled, not + 1
  // 2 * N * (capacity + bias row + zero row) * E * sizeof(float)
  EXPECT_EQ(cache.memory_bytes(), 2 * 3 * (40 + 2) * 16 * 4);
  cache.clear();
  EXPECT_EQ(cache.length(), 0);
  EXPECT_EQ(cache.capacity(), 40);  // memory kept
}

TEST_F(KVCacheTest, AReorderedStaticCacheSharesItsMemoryRows) {
  // Beams of one source: the static cache keeps its two projected memories
  // and lets five rows read them (the decode kernel in place; a masked or
  // weighted call from one gathered copy, kept), as a cache holding the five
  // repeated memories computes.
  auto m = eval_module(mha::MultiheadAttentionOptions(512, 8).batch_first(true));
  const Tensor memory = torch::randn({2, 24, 512}), index = torch::tensor({0, 0, 0, 1, 1});
  auto shared = KVCache::static_kv(), copied = KVCache::static_kv();
  const c10::InferenceMode inference;
  m->forward_cached(torch::randn({2, 1, 512}), memory, memory, shared);
  const int64_t bytes = shared.memory_bytes();
  shared.reorder(index);
  EXPECT_EQ(shared.batch_size(), 5);
  EXPECT_EQ(shared.memory_bytes(), bytes);  // no copy
  const Tensor repeated = memory.index_select(0, index);
  m->forward_cached(torch::randn({5, 1, 512}), repeated, repeated, copied);
  const auto tol = mha::support::parity_tolerance(torch::kFloat);
  const Tensor padding = torch::rand({5, 24}) < 0.2;
  for (const Tensor& kpm : {Tensor(), padding, padding}) {
    for (const bool weights : {false, true}) {
      const Tensor q = torch::randn({5, 1, 512});
      std::tuple<Tensor, Tensor> got;
      const auto ops = mha::test::ops_called(
          [&] { got = m->forward_cached(q, Tensor(), Tensor(), shared, kpm, weights); });
      const auto want = m->forward_cached(q, Tensor(), Tensor(), copied, kpm, weights);
      EXPECT_TRUE(torch::allclose(std::get<0>(got), std::get<0>(want), tol.rtol, tol.atol));
      if (weights) {
        EXPECT_TRUE(torch::allclose(std::get<1>(got), std::get<1>(want), tol.rtol, tol.atol));
      }
      const bool in_place = !kpm.defined() && !weights;
      EXPECT_EQ(mha::test::called(ops, "mha::paged_decode_attention"), in_place);
    }
  }
  // A second reorder maps the rows anew; the copy moves its buffers.
  const Tensor reversed = torch::tensor({4, 3, 2, 1, 0});
  shared.reorder(reversed);
  copied.reorder(reversed);
  EXPECT_EQ(shared.memory_bytes(), bytes);
  const Tensor q = torch::randn({5, 1, 512});
  EXPECT_TRUE(torch::allclose(std::get<0>(m->forward_cached(q, Tensor(), Tensor(), shared)),
                              std::get<0>(m->forward_cached(q, Tensor(), Tensor(), copied)),
                              tol.rtol, tol.atol));
}

TEST_F(KVCacheTest, BeamReordersOfAGrowingCacheShareTheirPast) {
  // Beam search reorders within the batch at every step: the cache copies
  // nothing, keeping where each row's past lies; the decode kernel reads
  // through that, a masked or weighted call after copying the rows home, and
  // each computes what a cache fed every row's own history without reorders
  // computes. Bias rows and a zero row ride along; 20 steps outgrow the first
  // capacity (16) with the map in place.
  auto m = eval_module(
      mha::MultiheadAttentionOptions(512, 8).batch_first(true).add_bias_kv(true).add_zero_attn(
          true));
  const int64_t n = 6, steps = 20;
  auto shared = KVCache::self_attention();
  Tensor history = torch::empty({n, 0, 512});  // each row's inputs, reordered with it
  const c10::InferenceMode inference;
  for (int64_t t = 0; t < steps; ++t) {
    const Tensor x = torch::randn({n, 1, 512});
    history = torch::cat({history, x}, 1);
    m->forward_cached(x, x, x, shared);
    const Tensor index = torch::randint(0, n, {n});
    const int64_t bytes = shared.memory_bytes();
    const auto ops = mha::test::ops_called([&] { shared.reorder(index); });
    EXPECT_FALSE(mha::test::called(ops, "aten::index_copy_")) << "step " << t;
    EXPECT_EQ(shared.memory_bytes(), bytes);
    history = history.index_select(0, index);
  }
  auto replayed = KVCache::self_attention();
  for (int64_t t = 0; t < steps; ++t) {
    const Tensor h = history.narrow(1, t, 1);
    m->forward_cached(h, h, h, replayed);
  }
  const auto tol = mha::support::parity_tolerance(torch::kFloat);
  const auto expect_same = [&](const Tensor& kpm, bool weights, bool in_place) {
    const Tensor x = torch::randn({n, 1, 512});
    std::tuple<Tensor, Tensor> got;
    const auto ops =
        mha::test::ops_called([&] { got = m->forward_cached(x, x, x, shared, kpm, weights); });
    const auto want = m->forward_cached(x, x, x, replayed, kpm, weights);
    EXPECT_TRUE(torch::allclose(std::get<0>(got), std::get<0>(want), tol.rtol, tol.atol));
    if (weights) {
      EXPECT_TRUE(torch::allclose(std::get<1>(got), std::get<1>(want), tol.rtol, tol.atol));
    }
    EXPECT_EQ(mha::test::called(ops, "mha::paged_decode_attention"), in_place);
  };
  expect_same(Tensor(), false, /*in_place=*/true);
  expect_same(torch::rand({n, steps + 2}) < 0.2, false, /*in_place=*/false);
  expect_same(Tensor(), true, /*in_place=*/false);
  shared.reorder(torch::tensor({5, 4, 3, 2, 1, 0}));  // after the rows went home
  replayed.reorder(torch::tensor({5, 4, 3, 2, 1, 0}));
  expect_same(Tensor(), false, /*in_place=*/true);
}

TEST_F(KVCacheTest, OutputsAreOrdinaryTensors) {
  auto m = eval_module(mha::MultiheadAttentionOptions(8, 2));
  auto cache = KVCache::self_attention();
  const Tensor x = torch::randn({3, 1, 8});
  Tensor out;
  {
    c10::InferenceMode inference;  // the buffers become inference tensors
    out = std::get<0>(m->forward_cached(x, x, x, cache));
  }
  out = std::get<0>(m->forward_cached(x, x, x, cache));  // written outside InferenceMode
  EXPECT_FALSE(out.is_inference());
  EXPECT_FALSE(out.requires_grad());
  out.add_(1.0);  // in place outside InferenceMode: allowed
  EXPECT_EQ(cache.length(), 6);
}

TEST_F(KVCacheTest, AcceptsNonContiguousFloatMasks) {
  auto m = eval_module(mha::MultiheadAttentionOptions(8, 2));
  auto cache = KVCache::self_attention();
  auto twin = KVCache::self_attention();
  const Tensor x = torch::randn({3, 2, 8});
  const Tensor kpm = torch::zeros({2, 6}).narrow(1, 0, 3);  // float, non-contiguous
  const Tensor mask = torch::zeros({3, 6}).narrow(1, 0, 3);
  const Tensor a = std::get<0>(m->forward_cached(x, x, x, cache, kpm, false, mask));
  const Tensor b = std::get<0>(m->forward_cached(x, x, x, twin));
  EXPECT_TRUE(mha::test::bitwise_equal(a, b));  // zero masks change nothing
}

/// Runs `statement`, expects a c10::Error containing `message` and `cache`'s
/// length unchanged.
#define EXPECT_REJECTED(statement, message)       \
  do {                                            \
    const int64_t length_before = cache.length(); \
    MHA_ASSERT_THROWS_WITH(statement, message);   \
    EXPECT_EQ(cache.length(), length_before);     \
  } while (false)

TEST_F(KVCacheTest, BadInputNamesTheArgumentAndChangesNothing) {
  auto m = eval_module(mha::MultiheadAttentionOptions(8, 2).add_bias_kv(true));
  auto other = eval_module(mha::MultiheadAttentionOptions(8, 2).add_bias_kv(true));
  auto cache = KVCache::self_attention(6);
  auto twin = KVCache::self_attention(6);
  const Tensor x = torch::randn({4, 2, 8}), step = torch::randn({1, 2, 8});
  m->forward_cached(x, x, x, cache);
  m->forward_cached(x, x, x, twin);

  const Tensor step3 = torch::randn({1, 3, 8});
  EXPECT_REJECTED(m->forward_cached(step3, step3, step3, cache), "expected query batch size 2");
  EXPECT_REJECTED(m->forward_cached(step, step, step, cache, torch::zeros({2, 4}, torch::kBool)),
                  "Expected key_padded_mask.shape[1] to be 5, but got 4");
  EXPECT_REJECTED(m->forward_cached(step, step, step, cache, {}, false, torch::zeros({1, 4})),
                  "The shape of the 2D attn_mask is torch.Size([1, 4]), but should be (1, 5).");
  EXPECT_REJECTED(m->forward_cached(step, step, step, cache, torch::zeros({2, 5}, torch::kInt)),
                  "key_padding_mask");
  const Tensor three = torch::randn({3, 2, 8});
  EXPECT_REJECTED(m->forward_cached(three, three, three, cache), "the cache is full");
  EXPECT_REJECTED(other->forward_cached(step, step, step, cache), "another module");
  EXPECT_REJECTED(m->forward_cached(step, Tensor(), Tensor(), cache), "self-attention cache");
  EXPECT_REJECTED(m->forward_cached(step, three, three, cache), "expected key sequence length 1");
  EXPECT_REJECTED(m->forward_cached(step.to(torch::kFloat64), step, step, cache), "query");
  m->train();
  EXPECT_REJECTED(m->forward_cached(step, step, step, cache), "training mode");
  m->eval();
  MHA_ASSERT_THROWS_WITH(cache.reorder(torch::tensor({0, 2})), "expected index entries in [0, 2)");
  MHA_ASSERT_THROWS_WITH(cache.reorder(torch::tensor({0.0})), "int64");
  EXPECT_EQ(cache.batch_size(), 2);

  // The cache still decodes exactly as one that never saw the bad calls.
  const Tensor a = std::get<0>(m->forward_cached(step, step, step, cache));
  const Tensor b = std::get<0>(m->forward_cached(step, step, step, twin));
  EXPECT_TRUE(mha::test::bitwise_equal(a, b));

  m->to(torch::kFloat64);  // the module changed after filling
  const Tensor step64 = step.to(torch::kFloat64);
  EXPECT_REJECTED(m->forward_cached(step64, step64, step64, cache), "cache's dtype Float");
}

TEST_F(KVCacheTest, StaticCacheRejectsKeysOnceFilled) {
  auto m = eval_module(mha::MultiheadAttentionOptions(8, 2).kdim(5).vdim(3));
  auto cache = KVCache::static_kv();
  const Tensor q = torch::randn({1, 2, 8});
  const Tensor memory_k = torch::randn({7, 2, 5}), memory_v = torch::randn({7, 2, 3});
  MHA_ASSERT_THROWS_WITH(m->forward_cached(q, Tensor(), Tensor(), cache), "first call");
  EXPECT_REJECTED(m->forward_cached(q, memory_k, memory_k, cache),
                  "expected value feature size (vdim) 3");
  m->forward_cached(q, memory_k, memory_v, cache);
  EXPECT_EQ(cache.length(), 7);
  EXPECT_REJECTED(m->forward_cached(q, memory_k, memory_v, cache), "already holds");
  const auto [out, weights] = m->forward_cached(q, Tensor(), Tensor(), cache, {}, true);
  EXPECT_EQ(weights.sizes(), (std::vector<int64_t>{2, 1, 7}));
  cache.clear();
  m->forward_cached(q, memory_k, memory_v, cache);  // a new memory after clear()
}

TEST_F(KVCacheTest, FixedCapacityStepsAllocateNothingThatGrowsWithLength) {
  torch::NoGradGuard no_grad;
  constexpr int64_t kCapacity = 2048, kBatch = 2, kEmbed = 64;
  auto m = eval_module(mha::MultiheadAttentionOptions(kEmbed, 4));
  auto cache = KVCache::self_attention(kCapacity);
  static mha::support::CountingAllocator counting;  // outputs outlive the measured calls
  auto step_peak = [&](const Tensor& kpm) {
    const Tensor x = torch::randn({1, kBatch, kEmbed});
    Tensor out;
    return counting.measure_peak_bytes(
        [&] { out = std::get<0>(m->forward_cached(x, x, x, cache, kpm)); });
  };
  // Lengths from 512 on: SDPA's CPU flash kernel works in key blocks of
  // min(S, 512) columns, so its scratch grows with S only up to 512.
  const Tensor prompt = torch::randn({600, kBatch, kEmbed});
  m->forward_cached(prompt, prompt, prompt, cache);
  const int64_t bytes = cache.memory_bytes();
  const int64_t short_peak = step_peak({});
  const Tensor rest = torch::randn({1300, kBatch, kEmbed});
  m->forward_cached(rest, rest, rest, cache);
  const int64_t long_peak = step_peak({});
  std::cout << "single step, no mask: peak allocator bytes " << short_peak << " at length 601, "
            << long_peak << " at length 1902; cache " << bytes << " bytes\n";
  EXPECT_EQ(cache.memory_bytes(), bytes);  // never reallocated
  EXPECT_EQ(long_peak, short_peak);        // nothing grows with the cached length
  EXPECT_LT(long_peak, bytes / 64);        // the step's own tensors only
  // With a padding mask, the step's extra memory is linear in the length: the
  // (N, S) mask in float, never an (L, S) or (S, S) matrix.
  const int64_t length = cache.length() + 1;
  const int64_t masked_peak = step_peak(torch::zeros({kBatch, length}, torch::kBool));
  std::cout << "single step, key_padding_mask: peak allocator bytes " << masked_peak << "\n";
  EXPECT_LE(masked_peak - long_peak, 2 * kBatch * length * 4);
}

}  // namespace
