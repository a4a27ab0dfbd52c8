// Cached Transformer decoding against Python: each model of
// scripts/export_seq2seq_reference.py (an nn.Transformer trained at test time
// on sequence reversal) is decoded greedily with mha::TransformerDecoderCache,
// one position per step, and compared with Python's greedy loop, which re-runs
// the decoder on the whole prefix at every step: the same tokens, and every
// step's logits within the float32 parity tolerance. Also a prompt decoded in
// one call and a beam reorder, each against the same Python logits. Prints
// how many steps' logits are bitwise equal to Python's.

#include <mha/batching.h>
#include <mha/state_dict.h>
#include <mha/transformer.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <vector>

#include "parity_report.h"
#include "seq2seq_model.h"
#include "support.h"
#include "tolerances.h"

namespace {

using mha::test::tensors_close;
using torch::Tensor;

std::string reference_dir() {
  const char* dir = std::getenv("MHA_SEQ2SEQ_REFERENCE_DIR");
  return dir ? dir : MHA_SEQ2SEQ_REFERENCE_DIR;
}

/// A reference file: the model and what Python decoded.
struct Reference {
  std::map<std::string, Tensor> file;
  seq2seq::Model model{nullptr};
  Tensor src, src_key_padding_mask, tokens, logits;  // (N, S), (N, S), (N, 1 + T), (T, N, V)

  explicit Reference(const std::string& name)
      : file(mha::read_state_dict(reference_dir() + "/" + name + ".pt")),
        model(seq2seq::load_model(file)),
        src(file.at("src")),
        tokens(file.at("tokens")),
        logits(file.at("logits")) {
    const auto padding = file.find("src_key_padding_mask");
    if (padding != file.end()) src_key_padding_mask = padding->second;
  }
  int64_t steps() const { return logits.size(0); }
};

class TransformerDecodingParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { torch::set_num_threads(1); }  // as the export script
  const mha::support::Tolerance tol = mha::support::parity_tolerance(torch::kFloat32);
};

TEST_P(TransformerDecodingParity, GreedyTokensAndStepLogitsMatchPythonsGreedyLoop) {
  Reference ref(GetParam());
  const auto [tokens, logits] =
      seq2seq::greedy_decode(ref.model, ref.src, ref.src_key_padding_mask, ref.steps());
  EXPECT_TRUE(torch::equal(tokens, ref.tokens)) << "mha:\n"
                                                << tokens << "\nPython:\n"
                                                << ref.tokens;
  int bitwise = 0;
  for (int64_t step = 0; step < ref.steps(); ++step) {
    EXPECT_TRUE(tensors_close(logits[step], ref.logits[step], tol.rtol, tol.atol))
        << "step " << step;
    bitwise += mha::test::bitwise_equal(logits[step], ref.logits[step]) ? 1 : 0;
  }
  std::cout << GetParam() << ": " << ref.steps() << " steps, same tokens; " << bitwise
            << " steps' logits bitwise equal to Python's, max |diff| "
            << (logits - ref.logits).abs().max().item<double>() << "\n";
}

/// Greedy decoding through a ContinuousBatch, every source admitted by one
/// add_sources call (one encoder call: the sources packed as rows, or padded
/// together where the reference has padding masks): Python's tokens.
TEST_P(TransformerDecodingParity, ContinuousBatchWithSourcesEncodedTogetherGivesPythonsTokens) {
  Reference ref(GetParam());
  auto& model = ref.model;
  torch::NoGradGuard no_grad;
  mha::ContinuousBatch batch(model->transformer,
                             mha::ContinuousBatchOptions().block_size(4).num_blocks(256));
  const int64_t n = ref.src.size(0);
  std::vector<Tensor> sources, masks;
  for (int64_t i = 0; i < n; ++i) {
    const Tensor x = model->inputs(ref.src.narrow(0, i, 1), 0);  // (1, S, E) or (S, 1, E)
    sources.push_back(x.reshape({-1, x.size(-1)}));              // (S, E)
    masks.push_back(ref.src_key_padding_mask.defined() ? ref.src_key_padding_mask[i] : Tensor());
  }
  const std::vector<int64_t> ids = batch.add_sources(sources, masks);
  Tensor tokens = ref.tokens.narrow(1, 0, 1).clone();  // BOS: (N, 1)
  for (int64_t step = 0; step < ref.steps(); ++step) {
    std::map<int64_t, Tensor> inputs;  // each request's newest token, embedded: (1, E)
    for (int64_t i = 0; i < n; ++i) {
      const Tensor newest = tokens.narrow(0, i, 1).narrow(1, step, 1);  // (1, 1)
      inputs[ids[i]] = model->inputs(newest, step).reshape({1, -1});
    }
    const auto outputs = batch.step(inputs);
    std::vector<Tensor> next;
    for (int64_t i = 0; i < n; ++i) {
      next.push_back(model->logits(outputs.at(ids[i]).unsqueeze(0)).argmax(-1));  // (1, 1)
    }
    tokens = torch::cat({tokens, torch::cat(next)}, 1);
  }
  EXPECT_TRUE(torch::equal(tokens, ref.tokens)) << "mha:\n"
                                                << tokens << "\nPython:\n"
                                                << ref.tokens;
}

/// Python's tokens fed back (teacher forcing), in calls of `chunk` positions, with the cache's
/// batch reordered by `index` after `reorder_at` positions when `index` is defined. Returns each
/// call's logits, (chunk, N or N', V).
std::vector<Tensor> decode_python_tokens(Reference& ref,
                                         int64_t chunk,
                                         int64_t reorder_at = -1,
                                         const Tensor& index = {}) {
  torch::NoGradGuard no_grad;
  auto& t = ref.model->transformer;
  Tensor kpm = ref.src_key_padding_mask;
  const Tensor memory = t->encode(ref.model->inputs(ref.src, 0), {}, kpm);
  Tensor tokens = ref.tokens;
  auto cache = t->make_decoder_cache();
  std::vector<Tensor> rows;
  for (int64_t start = 0; start < ref.steps(); start += chunk) {
    if (start == reorder_at) {
      cache.reorder(index);
      tokens = tokens.index_select(0, index);
      kpm = kpm.defined() ? kpm.index_select(0, index) : kpm;
    }
    const int64_t len = std::min(chunk, ref.steps() - start);
    // The memory is cached: passed on the first call only (it has the old batch later).
    const Tensor out = t->decode_cached(ref.model->inputs(tokens.narrow(1, start, len), start),
                                        start == 0 ? memory : Tensor(), cache, {}, kpm);
    rows.push_back(ref.model->logits(out).transpose(0, 1));  // (len, N, V)
  }
  EXPECT_EQ(cache.length(), ref.steps());
  return rows;
}

TEST_P(TransformerDecodingParity, PromptInOneCallThenStepsMatchPython) {
  Reference ref(GetParam());
  for (const int64_t chunk : {3, 4}) {
    const Tensor logits = torch::cat(decode_python_tokens(ref, chunk));
    EXPECT_TRUE(tensors_close(logits, ref.logits, tol.rtol, tol.atol)) << "chunks of " << chunk;
  }
}

TEST_P(TransformerDecodingParity, BeamReorderSelectsTheBatchEntries) {
  Reference ref(GetParam());
  const int64_t n = ref.src.size(0);
  // Surviving beams' parents: repeats, an entry dropped, a different batch size.
  const Tensor index = torch::tensor(std::vector<int64_t>{n - 1, 0, 0, 2});
  const int64_t at = 4;
  const auto rows = decode_python_tokens(ref, /*chunk=*/1, at, index);
  ASSERT_EQ(static_cast<int64_t>(rows.size()), ref.steps());
  const Tensor after = torch::cat(std::vector<Tensor>(rows.begin() + at, rows.end()));
  const Tensor expected = ref.logits.narrow(0, at, ref.steps() - at).index_select(1, index);
  EXPECT_TRUE(tensors_close(after, expected, tol.rtol, tol.atol));
}

/// Two beams per source, fed different tokens (source i's and source i +
/// 1's), reordered within each source after 3 positions by `reorder` or by
/// `reorder_decoded`: every call's logits (2N, 1, V).
std::vector<Tensor> decode_beam_pairs(Reference& ref, bool decoded_only) {
  torch::NoGradGuard no_grad;
  auto& t = ref.model->transformer;
  const int64_t n = ref.src.size(0);
  const Tensor pairs = torch::div(torch::arange(2 * n), 2, "floor");  // (2N): each source twice
  const Tensor kpm = ref.src_key_padding_mask.defined()
                         ? ref.src_key_padding_mask.index_select(0, pairs)
                         : Tensor();
  const Tensor memory = t->encode(ref.model->inputs(ref.src, 0), {}, ref.src_key_padding_mask)
                            .index_select(ref.model->config.batch_first ? 0 : 1, pairs);
  Tensor tokens = ref.tokens.index_select(0, (pairs + torch::arange(2 * n) % 2) % n);  // (2N, T)
  // Each source keeps its second beam twice: rows 2i + 1, 2i + 1.
  const Tensor index = pairs * 2 + 1;
  auto cache = t->make_decoder_cache();
  std::vector<Tensor> rows;
  for (int64_t start = 0; start < ref.steps(); ++start) {
    if (start == 3) {
      decoded_only ? cache.reorder_decoded(index) : cache.reorder(index);
      tokens = tokens.index_select(0, index);
    }
    const Tensor out = t->decode_cached(ref.model->inputs(tokens.narrow(1, start, 1), start),
                                        start == 0 ? memory : Tensor(), cache, {}, kpm);
    rows.push_back(ref.model->logits(out));  // (2N, 1, V)
  }
  return rows;
}

TEST_P(TransformerDecodingParity, ReorderDecodedIsReorderForBeamsOfOneSource) {
  Reference ref(GetParam());
  const Tensor decoded = torch::cat(decode_beam_pairs(ref, /*decoded_only=*/true), 1);
  const Tensor full = torch::cat(decode_beam_pairs(ref, /*decoded_only=*/false), 1);
  EXPECT_TRUE(tensors_close(decoded, full, tol.rtol, tol.atol));
  auto cache = ref.model->transformer->make_decoder_cache();
  const Tensor memory =
      ref.model->transformer->encode(ref.model->inputs(ref.src, 0), {}, ref.src_key_padding_mask);
  ref.model->transformer->decode_cached(ref.model->inputs(ref.tokens.narrow(1, 0, 1), 0), memory,
                                        cache, {}, ref.src_key_padding_mask);
  MHA_ASSERT_THROWS_WITH(cache.reorder_decoded(torch::tensor(std::vector<int64_t>{0})),
                         "reorder_decoded: expected index of the cache's batch size");
}

INSTANTIATE_TEST_SUITE_P(Python,
                         TransformerDecodingParity,
                         ::testing::ValuesIn(mha::support::read_manifest(reference_dir())),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TransformerDecodingParity);

TEST(TransformerDecodingManifest, HasTheCases) {
  EXPECT_GE(mha::support::read_manifest(reference_dir()).size(), 3u)
      << "run `python scripts/export_seq2seq_reference.py --out " << reference_dir() << "`";
}

}  // namespace
