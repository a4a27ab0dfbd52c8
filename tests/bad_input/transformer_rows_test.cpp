// The Transformer bad-input table: layers, stacks and cached decoding
// (mha/transformer.h). Each row calls one of the subjects below; afterwards
// every subject's parameters, buffers and mode are unchanged, and so are the
// decoder caches: same lengths and batch, and a valid next step gives, bit for
// bit, what the same step gives on a twin cache that saw no failed call.

#include <mha/transformer.h>

#include <algorithm>

#include "bad_input/bad_input_table.h"
#include "module_state.h"

namespace mha {
namespace test {
namespace bad_input {
namespace {

mha::TransformerLayerOptions layer_options(bool batch_first) {
  return mha::TransformerLayerOptions(8, 2).dim_feedforward(16).dropout(0.0).batch_first(
      batch_first);
}

/// What every Transformer row starts from: E=8, H=2, N=3, memory S=5, a 3-position prompt.
struct TransformerSubjects {
  mha::TransformerEncoderLayer encoder_layer{layer_options(false)};      // training
  mha::TransformerEncoderLayer fast_encoder_layer{layer_options(true)};  // eval: Python's fast path
  mha::TransformerDecoderLayer decoder_layer{layer_options(false)};      // training
  mha::TransformerEncoder encoder{
      mha::TransformerEncoderOptions(mha::TransformerEncoderLayer(layer_options(true)), 2)};
  mha::Transformer model{mha::TransformerOptions(8, 2, 1, 2).dim_feedforward(16).dropout(0.0)};
  mha::TransformerDecoder training_decoder{
      mha::TransformerDecoderOptions(mha::TransformerDecoderLayer(layer_options(false)), 1)};
  // In eval mode, so that a cached call reaches the check of the cache's owner.
  mha::TransformerDecoder other_decoder{
      mha::TransformerDecoderOptions(mha::TransformerDecoderLayer(layer_options(false)), 1)};
  Tensor memory = torch::randn({5, 3, 8});                           // (S, N, E)
  Tensor prompt = torch::randn({3, 3, 8});                           // (T, N, E)
  mha::TransformerDecoderCache cache = model->make_decoder_cache();  // holds the prompt
  mha::TransformerDecoderCache twin = model->make_decoder_cache();   // the same, no failed call
  mha::TransformerDecoderCache empty = model->make_decoder_cache();
  mha::TransformerDecoderCache full = model->make_decoder_cache(/*max_len=*/3);  // the prompt

  TransformerSubjects() {
    fast_encoder_layer->eval();
    encoder->eval();
    model->eval();
    other_decoder->eval();
    for (auto* c : {&cache, &twin, &full}) model->decode_cached(prompt, memory, *c);
  }

  /// The subjects whose state a row must not change.
  std::vector<torch::nn::Module*> modules() {
    return {encoder_layer.get(), fast_encoder_layer.get(), decoder_layer.get(), encoder.get(),
            model.get(),         training_decoder.get(),   other_decoder.get()};
  }
};

struct TransformerRow {
  std::string name;
  std::vector<std::string> message;  ///< substrings: the argument, expected, actual
  Kind kind = Kind::kError;
  std::function<void(TransformerSubjects&)> call;
};

void PrintTo(const TransformerRow& row, std::ostream* os) { *os << row.name; }

/// One new position (1, N, E).
Tensor new_position(int64_t batch = 3) { return torch::randn({1, batch, 8}); }

/// Construction (nhead must divide d_model) and the uncached forwards.
std::vector<TransformerRow> transformer_forward_rows() {
  using S = TransformerSubjects;
  std::vector<TransformerRow> rows{
      {"EncoderLayerNheadNotDividing",
       {"embed_dim must be divisible by num_heads, got embed_dim=8 and num_heads=3"},
       Kind::kValueError,
       [](S&) { static_cast<void>(mha::TransformerEncoderLayer(8, 3)); }},
      {"DecoderLayerNheadZero",
       {"embed_dim and num_heads must be greater than 0, got embed_dim=8 and num_heads=0"},
       Kind::kValueError,
       [](S&) { static_cast<void>(mha::TransformerDecoderLayer(8, 0)); }},
      {"TransformerNheadNotDividing",
       {"got embed_dim=10 and num_heads=4"},
       Kind::kValueError,
       [](S&) { static_cast<void>(mha::Transformer(mha::TransformerOptions(10, 4, 1, 1))); }},
  };
  // The encoder layer on the slow path (training, grad) and Python's fast path.
  for (const bool fast : {false, true}) {
    auto run = [fast](S& s, Tensor x, Tensor mask, Tensor kpm) {
      torch::AutoGradMode grad(!fast);
      (fast ? s.fast_encoder_layer : s.encoder_layer)(x, mask, kpm);
    };
    const Tensor src = torch::randn({3, 5, 8});  // (N, L, E) or (L, N, E): both 3 x 5
    const int64_t batch = fast ? 3 : 5, len = fast ? 5 : 3;
    const std::string path = fast ? "FastPath" : "";
    rows.push_back({"EncoderLayer" + path + "DModel",
                    {"src must have d_model=8 features in its last dimension, but got shape "
                     "torch.Size([3, 5, 6])"},
                    Kind::kError,
                    [=](S& s) { run(s, torch::randn({3, 5, 6}), {}, {}); }});
    rows.push_back({"EncoderLayer" + path + "SrcMaskShape",
                    {"src_mask must have shape"},
                    Kind::kError,
                    [=](S& s) { run(s, src, torch::zeros({len, len + 1}), {}); }});
    rows.push_back({"EncoderLayer" + path + "SrcMaskDtype",
                    {"only bool and floating types of src_mask are supported, but got Int"},
                    Kind::kTypeError,
                    [=](S& s) { run(s, src, torch::zeros({len, len}, torch::kInt), {}); }});
    rows.push_back({"EncoderLayer" + path + "KeyPaddingMaskShape",
                    {"src_key_padding_mask must have shape"},
                    Kind::kError,
                    [=](S& s) { run(s, src, {}, bools({batch + 1, len})); }});
    rows.push_back({"EncoderLayer" + path + "KeyPaddingMaskDtype",
                    {"only bool and floating types of src_key_padding_mask"},
                    Kind::kTypeError,
                    [=](S& s) { run(s, src, {}, torch::zeros({batch, len}, torch::kLong)); }});
  }
  return rows;
}

/// The decoder layer, the encoder stack and the Transformer's forward.
std::vector<TransformerRow> transformer_stack_rows() {
  using S = TransformerSubjects;
  const Tensor tgt = torch::randn({4, 3, 8}), memory = torch::randn({5, 3, 8});
  const Tensor src = torch::randn({3, 5, 8});  // batch first
  return {
      {"DecoderLayerMemoryBatch",
       {"memory must have tgt's batch size 3, but got 2"},
       Kind::kError,
       [=](S& s) { s.decoder_layer(tgt, torch::randn({5, 2, 8})); }},
      {"DecoderLayerMemoryDModel",
       {"memory must have d_model=8 features"},
       Kind::kError,
       [=](S& s) { s.decoder_layer(tgt, torch::randn({5, 3, 4})); }},
      {"DecoderLayerMemoryMaskShape",
       {"memory_mask must have shape (4, 5) or (6, 4, 5), but got torch.Size([4, 4])"},
       Kind::kError,
       [=](S& s) { s.decoder_layer(tgt, memory, Tensor(), torch::zeros({4, 4})); }},
      {"DecoderLayerMemoryKeyPaddingMaskShape",
       {"memory_key_padding_mask must have shape (3, 5), but got torch.Size([3, 4])"},
       Kind::kError,
       [=](S& s) {
         s.decoder_layer(tgt, memory, Tensor(), Tensor(), Tensor(), torch::zeros({3, 4}));
       }},
      {"EncoderKeyPaddingMaskShape",
       {"src_key_padding_mask must have shape (3, 5), but got torch.Size([3, 4])"},
       Kind::kError,
       [=](S& s) {
         torch::NoGradGuard no_grad;  // the nested-tensor path's conditions
         s.encoder(src, Tensor(), bools({3, 4}));
       }},
      {"EncoderMaskShape",
       {"mask must have shape (5, 5) or (6, 5, 5), but got torch.Size([2, 5, 5])"},
       Kind::kError,
       [=](S& s) {
         torch::NoGradGuard no_grad;
         s.encoder(src, torch::zeros({2, 5, 5}));
       }},
      {"TransformerBatchMismatch",
       {"the batch number of src and tgt must be equal"},
       Kind::kError,
       [](S& s) { s.model(torch::randn({5, 3, 8}), torch::randn({4, 2, 8})); }},
      {"TransformerDModel",
       {"the feature number of src and tgt must be equal to d_model=8"},
       Kind::kError,
       [](S& s) { s.model(torch::randn({5, 3, 8}), torch::randn({4, 3, 6})); }},
      // Checked once, by the Transformer, with its own argument names (the
      // encoder calls this mask `mask`, the decoder's layers see `memory`).
      {"TransformerSrcMaskShape",
       {"src_mask must have shape (5, 5) or (6, 5, 5), but got torch.Size([4, 4])"},
       Kind::kError,
       [](S& s) {
         s.model->forward(torch::randn({5, 3, 8}), torch::randn({4, 3, 8}), torch::zeros({4, 4}));
       }},
      {"TransformerMemoryMaskShape",
       {"memory_mask must have shape (4, 5) or (6, 4, 5), but got torch.Size([4, 4])"},
       Kind::kError,
       [](S& s) {
         s.model->forward(torch::randn({5, 3, 8}), torch::randn({4, 3, 8}), {}, {},
                          torch::zeros({4, 4}));
       }},
      {"TransformerSrcDtype",
       {"expected src to have the parameters' dtype Float, but got Double"},
       Kind::kError,
       [](S& s) { s.model(torch::randn({5, 3, 8}, torch::kDouble), torch::randn({4, 3, 8})); }},
  };
}

/// Cached decoding: training mode, `tgt` and `memory` of `decode_cached`
/// (TransformerDecoder::forward_cached) and of the layer's forward_cached.
std::vector<TransformerRow> transformer_cached_rows() {
  using S = TransformerSubjects;
  auto decode = [](S& s, Tensor tgt, Tensor memory) {
    s.model->decode_cached(tgt, memory, s.cache);
  };
  return {
      {"CachedTraining",
       {"forward_cached is for inference", "training mode; call eval()"},
       Kind::kError,
       [](S& s) {
         auto cache = s.training_decoder->make_cache();
         s.training_decoder->forward_cached(s.prompt, s.memory, cache);
       }},
      {"CachedLayerTraining",
       {"forward_cached is for inference"},
       Kind::kError,
       [](S& s) {
         mha::TransformerDecoderLayerCache cache;
         s.decoder_layer->forward_cached(s.prompt, s.memory, cache);
       }},
      {"CachedTgtDModel",
       {"tgt must have d_model=8 features in its last dimension, but got shape "
        "torch.Size([1, 3, 6])"},
       Kind::kError,
       [=](S& s) { decode(s, torch::randn({1, 3, 6}), {}); }},
      {"CachedTgtRank",
       {"tgt must be unbatched 2-D or batched 3-D, but got a 4-D tensor"},
       Kind::kError,
       [=](S& s) { decode(s, torch::randn({1, 1, 3, 8}), {}); }},
      {"CachedTgtEmpty",
       {"tgt must have at least one new position", "torch.Size([0, 3, 8])"},
       Kind::kError,
       [=](S& s) { decode(s, torch::randn({0, 3, 8}), {}); }},
      {"CachedTgtDtype",
       {"expected tgt to have the parameters' dtype Float, but got Double"},
       Kind::kError,
       [=](S& s) { decode(s, new_position().to(torch::kDouble), {}); }},
      {"CachedTgtBatch",
       {"tgt must have the cache's batch size 3 (reorder() changes it), but got 2"},
       Kind::kError,
       [=](S& s) { decode(s, new_position(2), {}); }},
      {"CachedFirstCallWithoutMemory",
       {"memory must be given on the first forward_cached call", "undefined"},
       Kind::kError,
       [](S& s) { s.model->decode_cached(s.prompt, {}, s.empty); }},
      {"CachedMemoryBatch",
       {"memory must have tgt's batch size 3, but got 2"},
       Kind::kError,
       [=](S& s) { decode(s, new_position(), torch::randn({5, 2, 8})); }},
      {"CachedMemoryUnbatched",
       {"memory must be batched (3-D) as tgt is, but got a 2-D tensor"},
       Kind::kError,
       [=](S& s) { decode(s, new_position(), torch::randn({5, 8})); }},
      {"CachedMemoryDModel",
       {"memory must have d_model=8 features", "torch.Size([5, 3, 4])"},
       Kind::kError,
       [=](S& s) { decode(s, new_position(), torch::randn({5, 3, 4})); }},
      {"CachedMemoryLength",
       {"memory must have the 5 positions the cache holds", "but got 4"},
       Kind::kError,
       [=](S& s) { decode(s, new_position(), torch::randn({4, 3, 8})); }},
      {"CachedMemoryDtype",
       {"expected memory to have the parameters' dtype Float, but got Double"},
       Kind::kError,
       [](S& s) { s.model->decode_cached(s.prompt, s.memory.to(torch::kDouble), s.empty); }},
  };
}

/// Cached decoding: the padding masks, the cache's capacity and owner, the cache's own calls.
std::vector<TransformerRow> transformer_cache_rows() {
  using S = TransformerSubjects;
  auto decode = [](S& s, Tensor tgt_kpm, Tensor memory_kpm) {
    s.model->decode_cached(new_position(), {}, s.cache, tgt_kpm, memory_kpm);
  };
  return {
      {"CachedTgtKeyPaddingMaskShape",
       {"tgt_key_padding_mask must have shape (3, 4), but got torch.Size([3, 1])"},
       Kind::kError,
       [=](S& s) { decode(s, bools({3, 1}), {}); }},
      {"CachedTgtKeyPaddingMaskDtype",
       {"tgt_key_padding_mask must be bool or of the module's dtype Float, but got Long"},
       Kind::kTypeError,
       [=](S& s) { decode(s, torch::zeros({3, 4}, torch::kLong), {}); }},
      {"CachedMemoryKeyPaddingMaskShape",
       {"memory_key_padding_mask must have shape (3, 5), but got torch.Size([3, 4])"},
       Kind::kError,
       [=](S& s) { decode(s, {}, bools({3, 4})); }},
      {"CachedMemoryKeyPaddingMaskDtype",
       {"memory_key_padding_mask must be bool or of the module's dtype Float, but got Double"},
       Kind::kTypeError,
       [=](S& s) { decode(s, {}, torch::zeros({3, 5}, torch::kDouble)); }},
      {"CachedFullCache",
       {"the cache is full: it holds 3 of max_len 3 positions"},
       Kind::kError,
       [](S& s) { s.model->decode_cached(new_position(), {}, s.full); }},
      {"CachedCacheOfAnotherDecoder",
       {"cache must come from this decoder's make_cache() (1 layers), but it was made by "
        "another decoder (2 layers)"},
       Kind::kError,
       [](S& s) { s.other_decoder->forward_cached(new_position(), {}, s.cache); }},
      {"CachedMakeCacheNegativeMaxLen",
       {"max_len must be >= 0", "got -1"},
       Kind::kValueError,
       [](S& s) { s.model->make_decoder_cache(-1); }},
      {"CachedReorderIndexOutOfRange",
       {"expected index entries in [0, 3) (the cache's batch size), but got values in [0, 3]"},
       Kind::kIndexError,
       [](S& s) { s.cache.reorder(torch::tensor({0, 3}, torch::kLong)); }},
      {"CachedReorderIndexDtype",
       {"expected index to be a non-empty 1-D int64 tensor", "Int"},
       Kind::kTypeError,
       [](S& s) { s.cache.reorder(torch::tensor({0, 1}, torch::kInt)); }},
  };
}

std::vector<TransformerRow> transformer_rows() {
  std::vector<TransformerRow> all;
  for (auto table : {transformer_forward_rows, transformer_stack_rows, transformer_cached_rows,
                     transformer_cache_rows}) {
    for (auto& row : table()) all.push_back(std::move(row));
  }
  return all;
}

struct TransformerBadInputTable : mha::test::SeedingFixture,
                                  ::testing::WithParamInterface<TransformerRow> {};

/// The caches hold what they held: lengths, batch, and the next step's output.
void expect_caches_unchanged(TransformerSubjects& s) {
  EXPECT_EQ(s.cache.length(), 3);
  EXPECT_EQ(s.cache.memory_length(), 5);
  EXPECT_EQ(s.cache.batch_size(), 3);
  EXPECT_EQ(s.empty.length() + s.empty.memory_length(), 0);
  EXPECT_EQ(s.full.length(), 3);
  const Tensor next = new_position();
  EXPECT_TRUE(mha::test::bitwise_equal(s.model->decode_cached(next, {}, s.cache),
                                       s.model->decode_cached(next, {}, s.twin)))
      << "the cache changed";
}

TEST_P(TransformerBadInputTable, RaisesNamingTheArgumentAndChangesNothing) {
  const TransformerRow& row = GetParam();
  TransformerSubjects subjects;
  std::vector<mha::support::ModuleState> before;
  std::vector<bool> training_before;
  for (auto* m : subjects.modules()) {
    before.push_back(mha::support::snapshot(*m));
    training_before.push_back(m->is_training());
  }
  ASSERT_TRUE(raised_message([&] { row.call(subjects); }, row.kind, row.message))
      << "expected a " << kind_name(row.kind) << " containing: " << row.message[0];
  const auto modules = subjects.modules();
  for (size_t i = 0; i < modules.size(); ++i) {
    EXPECT_EQ(mha::support::state_difference(mha::support::snapshot(*modules[i]), before[i]), "")
        << modules[i]->name();
    EXPECT_EQ(modules[i]->is_training(), training_before[i]) << modules[i]->name();
  }
  expect_caches_unchanged(subjects);
}

INSTANTIATE_TEST_SUITE_P(Rows,
                         TransformerBadInputTable,
                         ::testing::ValuesIn(transformer_rows()),
                         [](const ::testing::TestParamInfo<TransformerRow>& info) {
                           return info.param.name;
                         });

TEST(BadInputTableSize, TransformerTableCoversLayersStacksAndCachedDecoding) {
  const auto all = transformer_rows();
  const auto cached = std::count_if(all.begin(), all.end(), [](const TransformerRow& r) {
    return r.name.rfind("Cached", 0) == 0;
  });
  EXPECT_GE(all.size() - static_cast<size_t>(cached), 20u);  // construction, layers, stacks
  EXPECT_GE(cached, 20);
}

}  // namespace
}  // namespace bad_input
}  // namespace test
}  // namespace mha
