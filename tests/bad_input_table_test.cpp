// Bad input, one table: every invalid construction or call raises c10::Error
// (of the stated kind) whose message names the argument and gives the expected
// and the actual value (Python's wording where Python has one), and nothing is
// lost: the module's parameters and buffers are bitwise unchanged (names,
// values, requires_grad, no gradient) and so is its mode; a failed
// construction leaves the global random generator where it was.
//
// Rows: construction, forward (query/key/value), masks, the functional form,
// the weights loaders (a file made for the row, loaded into the row's module:
// the message must also start with the file's path), and `mha-parity`'s
// arguments (a separate process: exit status 2 and the message on stderr).
// Then the Transformer table: its layers, stacks and cached decoding.

#include <ATen/CPUGeneratorImpl.h>
#include <mha/functional.h>
#include <mha/multihead_attention.h>
#include <mha/state_dict.h>
#include <mha/transformer.h>
#include <sys/wait.h>

#include <cstdio>
#include <functional>

#include "module_state.h"
#include "support.h"
#include "weights_files.h"

namespace {

using mha::MultiheadAttention;
using mha::MultiheadAttentionOptions;
using mha::test::binunicode;
using mha::test::fixture;
using mha::test::read_bytes;
using mha::test::safetensors_bytes;
using mha::test::tensor_pickle;
using mha::test::torch_archive;
using mha::test::u64;
using mha::test::write_bytes;
using torch::Tensor;
namespace F = mha::functional;

/// Inputs every forward row starts from: L=4, S=6, N=3, E=8 (H=2), sequence-first.
struct Inputs {
  Tensor q = torch::randn({4, 3, 8});  // (L, N, E)
  Tensor k = torch::randn({6, 3, 8});  // (S, N, E)
  Tensor v = torch::randn({6, 3, 8});  // (S, N, E)
};

enum class Kind { kError, kValueError, kTypeError, kIndexError, kExitStatus2 };

struct Row {
  std::string name;
  std::vector<std::string> message;  ///< substrings: the argument, expected, actual
  Kind kind = Kind::kError;
  MultiheadAttentionOptions options{8, 2};  ///< the module built (or attempted)
  /// Called on the module built from `options`; unset: the construction is the row.
  std::function<void(MultiheadAttention&, const Inputs&)> call;
  /// Loader rows: writes the row's file into the given folder and returns its
  /// path, which `mha::load_state_dict` then loads into the module.
  std::function<std::string(const std::string& dir)> file{};
  mha::LoadOptions load_options{};
  /// `mha-parity` rows: its arguments (`{fixtures}` stands for the checkpoints' folder).
  std::vector<std::string> cli{};
};

Row construction(std::string name,
                 MultiheadAttentionOptions options,
                 std::vector<std::string> message) {
  return Row{std::move(name), std::move(message), Kind::kValueError, std::move(options), {}};
}

Row forward(std::string name,
            std::function<void(MultiheadAttention&, const Inputs&)> call,
            std::vector<std::string> message,
            Kind kind = Kind::kError,
            MultiheadAttentionOptions options = MultiheadAttentionOptions(8, 2)) {
  return Row{std::move(name), std::move(message), kind, std::move(options), std::move(call)};
}

/// The module of the checkpoints of scripts/export_test_checkpoints.py.
constexpr int64_t kFixtureEmbedDim = 16, kFixtureHeads = 4;

Row loader(std::string name,
           std::function<std::string(const std::string&)> file,
           std::vector<std::string> message,
           mha::LoadOptions load_options = {},
           MultiheadAttentionOptions options = MultiheadAttentionOptions(kFixtureEmbedDim,
                                                                         kFixtureHeads)) {
  Row row{std::move(name), std::move(message), Kind::kError, std::move(options), {}};
  row.file = std::move(file);
  row.load_options = std::move(load_options);
  return row;
}

Row parity_cli(std::string name, std::vector<std::string> args, std::vector<std::string> message) {
  Row row{
      std::move(name), std::move(message), Kind::kExitStatus2, MultiheadAttentionOptions(8, 2), {}};
  row.cli = std::move(args);
  return row;
}

std::string in(const std::string& dir, const std::string& name) { return dir + "/" + name; }

/// A file of `module`'s weights (as save_state_dict writes it).
std::string weights_of(const std::string& path, const torch::nn::Module& module) {
  mha::save_state_dict(module, path);
  return path;
}

// Views that reach past their storage (the check of pickle_tensors.cpp).
constexpr const char* kPastStorage = "reaches past its storage: the storage holds 16 bytes";

MultiheadAttentionOptions opts(int64_t embed_dim, int64_t num_heads) {
  return MultiheadAttentionOptions(embed_dim, num_heads);
}

Tensor on_meta(std::vector<int64_t> shape, c10::ScalarType dtype = torch::kFloat32) {
  return torch::empty(shape, torch::dtype(dtype).device(torch::kMeta));
}
Tensor bools(std::vector<int64_t> shape) { return torch::zeros(shape, torch::kBool); }

/// Functional-form options matching module `m` (sequence-first).
F::MultiheadAttentionForwardFuncOptions functional_options(MultiheadAttention& m) {
  return F::MultiheadAttentionForwardFuncOptions(
             m->options.embed_dim(), m->options.num_heads(), m->in_proj_weight, m->in_proj_bias,
             m->bias_k, m->bias_v, m->options.add_zero_attn(), m->options.dropout(),
             m->out_proj->weight, m->out_proj->bias)
      .training(m->is_training());
}

/// Construction: invalid options (ValueError, nothing drawn from the generator).
std::vector<Row> construction_rows() {
  return {construction("EmbedDimZero", opts(0, 2),
                       {"embed_dim and num_heads must be greater than 0", "embed_dim=0"}),
          construction("EmbedDimNegative", opts(-8, 2), {"greater than 0", "embed_dim=-8"}),
          construction("NumHeadsZero", opts(8, 0), {"greater than 0", "num_heads=0"}),
          construction("NumHeadsNegative", opts(8, -1),
                       {"greater than 0", "embed_dim=8 and num_heads=-1"}),
          construction("EmbedDimNotDivisible", opts(10, 3),
                       {"embed_dim must be divisible by num_heads", "embed_dim=10", "num_heads=3"}),
          construction("HeadsAboveEmbedDim", opts(2, 4),
                       {"divisible by num_heads", "embed_dim=2", "num_heads=4"}),
          construction("DropoutAboveOne", opts(8, 2).dropout(1.5),
                       {"dropout probability has to be between 0 and 1, but got 1.5"}),
          construction("DropoutNegative", opts(8, 2).dropout(-0.25),
                       {"dropout probability", "between 0 and 1", "-0.25"}),
          construction("DropoutNaN", opts(8, 2).dropout(std::nan("")),
                       {"dropout probability", "between 0 and 1", "nan"}),
          construction("KdimZero", opts(8, 2).kdim(0),
                       {"kdim and vdim must be greater than 0", "kdim=0", "vdim=8"}),
          construction("VdimNegative", opts(8, 2).kdim(4).vdim(-3),
                       {"greater than 0", "kdim=4", "vdim=-3"})};
}

/// forward: query, key and value.
std::vector<Row> input_rows() {
  using M = MultiheadAttention;
  using I = Inputs;
  return {
      forward("UndefinedQuery", [](M& m, const I& x) { m(Tensor(), x.k, x.v); },
              {"expected query to be a defined tensor, but got an undefined one"}),
      forward("UndefinedKey", [](M& m, const I& x) { m(x.q, Tensor(), x.v); },
              {"expected key to be a defined tensor"}),
      forward("UndefinedValue", [](M& m, const I& x) { m(x.q, x.k, Tensor()); },
              {"expected value to be a defined tensor"}),
      forward("QueryRank4", [](M& m, const I& x) { m(torch::randn({1, 4, 3, 8}), x.k, x.v); },
              {"query should be unbatched 2D or batched 3D tensor but received 4-D query tensor"}),
      forward("QueryRank1", [](M& m, const I& x) { m(torch::randn({8}), x.k, x.v); },
              {"query should be unbatched 2D or batched 3D", "1-D query"}),
      forward("QueryScalar", [](M& m, const I& x) { m(torch::tensor(1.0f), x.k, x.v); },
              {"query should be unbatched 2D or batched 3D", "0-D query"}),
      forward("BatchedQueryUnbatchedKey",
              [](M& m, const I& x) { m(x.q, torch::randn({6, 8}), x.v); },
              {"For batched (3-D) `query`, expected `key` and `value` to be 3-D but found 2-D and "
               "3-D tensors respectively"}),
      forward("BatchedQueryUnbatchedValue",
              [](M& m, const I& x) { m(x.q, x.k, torch::randn({6, 8})); },
              {"expected `key` and `value` to be 3-D but found 3-D and 2-D"}),
      forward("UnbatchedQueryBatchedValue",
              [](M& m, const I& x) { m(torch::randn({4, 8}), torch::randn({6, 8}), x.v); },
              {"For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found 2-D "
               "and 3-D tensors respectively"}),
      forward("QueryFeatureSize", [](M& m, const I& x) { m(torch::randn({4, 3, 6}), x.k, x.v); },
              {"was expecting embedding dimension of 8, but got 6"}),
      forward("KeyFeatureSize", [](M& m, const I& x) { m(x.q, torch::randn({6, 3, 5}), x.v); },
              {"expected key feature size (kdim) 8, but got 5"}),
      forward("ValueFeatureSize", [](M& m, const I& x) { m(x.q, x.k, torch::randn({6, 3, 7})); },
              {"expected value feature size (vdim) 8, but got 7"}),
      forward(
          "KeyFeatureSizeWithKdim", [](M& m, const I& x) { m(x.q, x.k, torch::randn({6, 3, 7})); },
          {"expected key feature size (kdim) 5, but got 8"}, Kind::kError,
          opts(8, 2).kdim(5).vdim(7)),
      forward(
          "ValueFeatureSizeWithVdim",
          [](M& m, const I& x) { m(x.q, torch::randn({6, 3, 5}), x.v); },
          {"expected value feature size (vdim) 7, but got 8"}, Kind::kError,
          opts(8, 2).kdim(5).vdim(7)),
      forward("KeyBatchSize",
              [](M& m, const I& x) { m(x.q, torch::randn({6, 2, 8}), torch::randn({6, 2, 8})); },
              {"expected key and value batch size 3 (the query's), but got key 2 and value 2"}),
      forward("ValueBatchSize", [](M& m, const I& x) { m(x.q, x.k, torch::randn({6, 4, 8})); },
              {"expected key and value batch size 3 (the query's), but got key 3 and value 4"}),
      forward(
          "BatchFirstKeyBatchSize",
          [](M& m, const I&) {
            m(torch::randn({3, 4, 8}), torch::randn({2, 6, 8}), torch::randn({2, 6, 8}));
          },
          {"batch size 3 (the query's), but got key 2 and value 2"}, Kind::kError,
          opts(8, 2).batch_first(true)),
      forward("ValueSequenceLength", [](M& m, const I& x) { m(x.q, x.k, torch::randn({5, 3, 8})); },
              {"expected value sequence length 6 (the key's), but got 5"}),
      forward("UnbatchedValueSequenceLength",
              [](M& m, const I&) {
                m(torch::randn({4, 8}), torch::randn({6, 8}), torch::randn({7, 8}));
              },
              {"expected value sequence length 6 (the key's), but got 7"}),
      forward(
          "QueryDtypeDouble", [](M& m, const I& x) { m(x.q.to(torch::kFloat64), x.k, x.v); },
          {"expected query to have the parameters' dtype Float, but got Double"}, Kind::kError),
      forward(
          "KeyDtypeHalf", [](M& m, const I& x) { m(x.q, x.k.to(torch::kFloat16), x.v); },
          {"expected key to have the parameters' dtype Float, but got Half"}, Kind::kError),
      forward(
          "ValueDtypeLong", [](M& m, const I& x) { m(x.q, x.k, x.v.to(torch::kInt64)); },
          {"expected value to have the parameters' dtype Float, but got Long"}, Kind::kError),
      forward(
          "QueryFloatOnDoubleModule",
          [](M& m, const I& x) {
            m->to(torch::kFloat64);
            m(x.q, x.k, x.v);
          },
          {"expected query to have the parameters' dtype Double, but got Float"}, Kind::kError),
      forward("QueryOnMeta", [](M& m, const I& x) { m(on_meta({4, 3, 8}), x.k, x.v); },
              {"expected query on the parameters' device cpu, but got meta"}),
      forward("ValueOnMeta", [](M& m, const I& x) { m(x.q, x.k, on_meta({6, 3, 8})); },
              {"expected value on the parameters' device cpu, but got meta"})};
}

/// forward: key_padding_mask.
std::vector<Row> key_padding_mask_rows() {
  using M = MultiheadAttention;
  using I = Inputs;
  return {
      forward(
          "KeyPaddingMaskLong",
          [](M& m, const I& x) { m(x.q, x.k, x.v, torch::zeros({3, 6}, torch::kInt64)); },
          {"only bool and floating types of key_padding_mask are supported, but got Long"},
          Kind::kTypeError),
      forward(
          "KeyPaddingMaskByte",
          [](M& m, const I& x) { m(x.q, x.k, x.v, torch::zeros({3, 6}, torch::kUInt8)); },
          {"only bool and floating types of key_padding_mask are supported, but got Byte"},
          Kind::kTypeError),
      forward("KeyPaddingMaskRank1", [](M& m, const I& x) { m(x.q, x.k, x.v, bools({6})); },
              {"For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but "
               "found 1-D tensor instead"}),
      forward("KeyPaddingMaskRank3", [](M& m, const I& x) { m(x.q, x.k, x.v, bools({3, 1, 6})); },
              {"expected `key_padding_mask` to be `None` or 2-D but found 3-D"}),
      forward("KeyPaddingMaskLength", [](M& m, const I& x) { m(x.q, x.k, x.v, bools({3, 5})); },
              {"Expected key_padded_mask.shape[1] to be 6, but got 5"}),
      forward("KeyPaddingMaskBatch", [](M& m, const I& x) { m(x.q, x.k, x.v, bools({2, 6})); },
              {"Expected key_padded_mask.shape[0] to be 3, but got 2"}),
      forward("KeyPaddingMaskOnMeta",
              [](M& m, const I& x) { m(x.q, x.k, x.v, on_meta({3, 6}, torch::kBool)); },
              {"expected key_padding_mask on the query's device cpu, but got meta"}),
      forward("UnbatchedKeyPaddingMaskRank2",
              [](M& m, const I&) {
                m(torch::randn({4, 8}), torch::randn({6, 8}), torch::randn({6, 8}), bools({1, 6}));
              },
              {"For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D but "
               "found 2-D tensor instead"}),
      forward("UnbatchedKeyPaddingMaskLength",
              [](M& m, const I&) {
                m(torch::randn({4, 8}), torch::randn({6, 8}), torch::randn({6, 8}), bools({5}));
              },
              {"Expected key_padded_mask.shape[1] to be 6, but got 5"}),
      forward(
          "KeyPaddingMaskDoubleWithWeights",
          [](M& m, const I& x) { m(x.q, x.k, x.v, torch::zeros({3, 6}, torch::kFloat64)); },
          {"attention mask", "key_padding_mask", "query's dtype Float", "but got Double"},
          Kind::kTypeError)};
}

/// forward: attn_mask and is_causal.
std::vector<Row> attn_mask_rows() {
  using M = MultiheadAttention;
  using I = Inputs;
  const Tensor none;
  return {
      forward(
          "AttnMaskByte",
          [=](M& m, const I& x) {
            m(x.q, x.k, x.v, none, true, torch::zeros({4, 6}, torch::kUInt8));
          },
          {"only bool and floating types of attn_mask are supported, but got Byte"},
          Kind::kTypeError),
      forward(
          "AttnMaskInt",
          [=](M& m, const I& x) {
            m(x.q, x.k, x.v, none, false, torch::zeros({4, 6}, torch::kInt32));
          },
          {"only bool and floating types of attn_mask are supported, but got Int"},
          Kind::kTypeError),
      forward("AttnMask2dShape",
              [=](M& m, const I& x) { m(x.q, x.k, x.v, none, true, bools({3, 6})); },
              {"The shape of the 2D attn_mask is torch.Size([3, 6]), but should be (4, 6)."}),
      forward("AttnMask2dSourceLength",
              [=](M& m, const I& x) { m(x.q, x.k, x.v, none, false, bools({4, 7})); },
              {"The shape of the 2D attn_mask is torch.Size([4, 7]), but should be (4, 6)."}),
      forward("AttnMask3dShape",
              [=](M& m, const I& x) { m(x.q, x.k, x.v, none, true, bools({3, 4, 6})); },
              {"The shape of the 3D attn_mask is torch.Size([3, 4, 6]), but should be (6, 4, 6)."}),
      forward("AttnMaskRank4",
              [=](M& m, const I& x) { m(x.q, x.k, x.v, none, true, bools({3, 2, 4, 6})); },
              {"For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
               "4-D tensor instead"}),
      forward("AttnMaskRank1", [=](M& m, const I& x) { m(x.q, x.k, x.v, none, true, bools({6})); },
              {"expected `attn_mask` to be `None`, 2-D or 3-D but found 1-D"}),
      forward("UnbatchedAttnMask3dShape",
              [=](M& m, const I&) {
                m(torch::randn({4, 8}), torch::randn({6, 8}), torch::randn({6, 8}), none, true,
                  bools({3, 4, 6}));
              },
              {"Expected `attn_mask` shape to be (2, 4, 6) but got torch.Size([3, 4, 6])"}),
      forward("UnbatchedAttnMaskRank4",
              [=](M& m, const I&) {
                m(torch::randn({4, 8}), torch::randn({6, 8}), torch::randn({6, 8}), none, true,
                  bools({1, 2, 4, 6}));
              },
              {"For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
               "found 4-D tensor instead"}),
      forward(
          "AttnMaskOnMeta",
          [=](M& m, const I& x) { m(x.q, x.k, x.v, none, true, on_meta({4, 6}, torch::kBool)); },
          {"expected attn_mask on the query's device cpu, but got meta"}),
      forward(
          "AttnMaskDoubleWithWeights",
          [=](M& m, const I& x) {
            m(x.q, x.k, x.v, none, true, torch::zeros({4, 6}, torch::kFloat64));
          },
          {"attn_mask", "query's dtype Float", "but got Double"}, Kind::kTypeError),
      forward("AttnMaskDoubleWithoutWeights",
              [=](M& m, const I& x) {
                m(x.q, x.k, x.v, none, false, torch::zeros({4, 6}, torch::kFloat64));
              },
              {"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
               "attn_mask.dtype: double and  query.dtype: float"}),
      forward(
          "IsCausalWithoutAttnMask",
          [=](M& m, const I& x) { m(x.q, x.k, x.v, none, false, none, true, /*is_causal=*/true); },
          {"Need attn_mask if specifying the is_causal hint."})};
}

/// The functional form.
std::vector<Row> functional_rows() {
  using M = MultiheadAttention;
  using I = Inputs;
  return {
      forward("FunctionalEmbedDimToCheck",
              [](M& m, const I& x) {
                F::multi_head_attention_forward(x.q, x.k, x.v,
                                                functional_options(m).embed_dim_to_check(16));
              },
              {"was expecting embedding dimension of 16, but got 8"}),
      forward("FunctionalKeyValueShape",
              [](M& m, const I& x) {
                F::multi_head_attention_forward(x.q, x.k, torch::randn({5, 3, 8}),
                                                functional_options(m));
              },
              {"key shape torch.Size([6, 3, 8]) does not match value shape torch.Size([5, 3, 8])"}),
      forward("FunctionalStaticKBatchHeads",
              [](M& m, const I& x) {
                F::multi_head_attention_forward(
                    x.q, x.k, x.v, functional_options(m).static_k(torch::randn({5, 6, 4})));
              },
              {"expecting static_k.size(0) of 6, but got 5"}),
      forward("FunctionalStaticVHeadDim",
              [](M& m, const I& x) {
                F::multi_head_attention_forward(
                    x.q, x.k, x.v, functional_options(m).static_v(torch::randn({6, 6, 3})));
              },
              {"expecting static_v.size(2) of 4, but got 3"}),
      forward("FunctionalKeyWeightShape",
              [](M& m, const I& x) {
                auto o = functional_options(m)
                             .use_separate_proj_weight(true)
                             .q_proj_weight(torch::randn({8, 8}))
                             .k_proj_weight(torch::randn({8, 5}))
                             .v_proj_weight(torch::randn({8, 8}));
                F::multi_head_attention_forward(x.q, x.k, x.v, o);
              },
              {"expecting key weights shape of (8, 8), but got torch.Size([8, 5])"})};
}

/// Loaders: the file is bad (the message starts with its path).
std::vector<Row> bad_file_rows() {
  return {
      loader("NonexistentPath", [](const std::string& dir) { return in(dir, "missing.pt"); },
             {"no such file"}),
      loader("Directory", [](const std::string& dir) { return dir; }, {"is a directory"}),
      loader("EmptyFile",
             [](const std::string& dir) { return write_bytes(in(dir, "empty.pt"), ""); },
             {"empty file"}),
      loader("WrongMagic",
             [](const std::string& dir) {
               return write_bytes(in(dir, "text.pt"), "hello, these are not weights\n");
             },
             {"unrecognised weights format"}),
      loader("LegacyTorchSaveFormat",
             [](const std::string& dir) {
               return write_bytes(in(dir, "legacy.pt"),
                                  std::string("\x80\x02\x8a\x0a", 4) + "rest");
             },
             {"legacy torch.save format"}),
      loader("TruncatedTorchSave",
             [](const std::string& dir) {
               const auto bytes = read_bytes(fixture("mha.pt"));
               return write_bytes(in(dir, "truncated.pt"), bytes.substr(0, bytes.size() / 2));
             },
             {"not a readable zip archive"}),
      loader("TruncatedTorchScript",
             [](const std::string& dir) {
               const auto bytes = read_bytes(fixture("encoder_layer.torchscript.pt"));
               return write_bytes(in(dir, "truncated_script.pt"),
                                  bytes.substr(0, bytes.size() - 30));
             },
             {"not a readable zip archive"}),
      loader("CorruptZipCentralDirectory",
             [](const std::string& dir) {
               auto bytes = read_bytes(fixture("mha.pt"));
               const auto at = bytes.rfind("PK\x01\x02");  // the last central directory entry
               EXPECT_NE(at, std::string::npos);
               bytes.replace(at, 4, "XXXX");
               return write_bytes(in(dir, "bad_central_directory.pt"), bytes);
             },
             {"not a readable zip archive"}),
      loader("CorruptZipEntryPickle",
             [](const std::string& dir) {
               auto bytes = read_bytes(fixture("mha.pt"));
               const auto at = bytes.find(
                   "\x80\x02"
                   "ccollections\nOrderedDict");  // data.pkl, stored
               EXPECT_NE(at, std::string::npos);
               bytes.replace(at + 2, 24, std::string(24, '\xff'));
               return write_bytes(in(dir, "bad_pickle_entry.pt"), bytes);
             },
             {"data.pkl: offset 2: corrupt pickle: byte 0xff is not a pickle opcode"}),
      loader("ZipWithoutDataPkl",
             [](const std::string& dir) {
               const auto path = in(dir, "no_data_pkl.zip");
               {
                 caffe2::serialize::PyTorchStreamWriter writer(path);
                 writer.writeRecord("other", "x", 1);
               }
               return path;
             },
             {"zip archive without data.pkl"}),
      loader("PickleTruncatedBeforeStop",
             [](const std::string& dir) {
               const auto pickle = tensor_pickle(4, 0, 4, 1);
               return torch_archive(in(dir, "no_stop.pt"), pickle.substr(0, pickle.size() - 3),
                                    {{"0", std::string(16, '\0')}});
             },
             {"data.pkl: offset", "corrupt pickle: truncated: 1 bytes needed, 0 left"}),
      loader("PickleUnknownOpcode",
             [](const std::string& dir) {
               return torch_archive(in(dir, "opcode.pt"), std::string("\x80\x02}\xf0.", 5));
             },
             {"data.pkl: offset 3: corrupt pickle: byte 0xf0 is not a pickle opcode"}),
      loader("PickleOpcodeOutsideTheWeightsOnlySubset",
             [](const std::string& dir) {
               // DICT (protocol 0): valid pickle, refused by torch.load(weights_only=True) too.
               return torch_archive(in(dir, "dict_opcode.pt"), "\x80\x02(d.");
             },
             {"data.pkl: offset 3: unsupported: pickle opcode 0x64 ('d')"}),
      loader("PickleGlobalOutsideTheAllowList",
             [](const std::string& dir) {
               return torch_archive(in(dir, "os_system.pt"),
                                    "\x80\x02"
                                    "cos\nsystem\n.");
             },
             {"data.pkl: offset 2: unsupported: global 'os.system' is not in the weights-only "
              "allow-list",
              "nothing was imported or called"}),
      loader("WholePickledModule",
             [](const std::string&) {
               return fixture("zoo/whole_module.pt");  // torch.save(nn.Linear(2, 2))
             },
             {"data.pkl: offset", "unsupported: this is a whole pickled module (torch.save(model))",
              "Save model.state_dict() instead", "scripts/export_weights.py"}),
      loader("TwoPathsGiveOneName",
             [](const std::string&) {
               return fixture("zoo/name_collision.pt");  // {"a": {0: t, "0": t}}
             },
             {"data.pkl: unsupported: the tensors at ['a'][0] and ['a']['0'] both get the name "
              "'a.0'"}),
      loader("PickleOddSetItems",
             [](const std::string& dir) {
               // {MARK "k" SETITEMS}: a key without a value would make LibTorch read past its
               // stack.
               return torch_archive(in(dir, "odd.pt"), "\x80\x02}(" + binunicode("k") + "u.");
             },
             {"data.pkl: offset 10: corrupt pickle: SETITEMS with an odd number (1) of keys and "
              "values"}),
      loader("PickleMemoEntryNeverStored",
             [](const std::string& dir) {
               return torch_archive(in(dir, "memo.pt"),
                                    std::string("\x80\x02j\xff\xff\xff\xff.", 9));
             },
             {"data.pkl: offset 2: corrupt pickle: memo entry 4294967295 was never stored"}),
      loader("PickleNestedTooDeep",
             [](const std::string& dir) {
               // 3000 nested empty tuples: (((...ttt
               return torch_archive(in(dir, "deep.pt"), "\x80\x02" + std::string(3000, '(') +
                                                            std::string(3000, 't') + ".");
             },
             {"data.pkl: unsupported: containers nested deeper than 1000 levels"}),
      loader("PickleStackUnderflow",
             [](const std::string& dir) {
               return torch_archive(in(dir, "underflow.pt"), "\x80\x02}R.");
             },
             {"data.pkl: offset 3: corrupt pickle: stack underflow"}),
      loader("PickleWithoutTensors",
             [](const std::string& dir) {
               return torch_archive(in(dir, "list.pt"), "\x80\x02].");  // an empty list: no tensor
             },
             {"Missing key(s) in state_dict"}),
      loader("StorageRecordShorterThanItsTensor",
             [](const std::string& dir) {
               return torch_archive(in(dir, "short_storage.pt"), tensor_pickle(4, 0, 4, 1),
                                    {{"0", std::string(8, '\0')}});
             },
             {"data.pkl: offset",
              "corrupt pickle: storage '0' claims 4 elements of Float but its record 'data/0' "
              "holds 8 bytes"}),
      loader("StorageRecordMissing",
             [](const std::string& dir) {
               return torch_archive(in(dir, "missing_storage.pt"), tensor_pickle(4, 0, 4, 1));
             },
             {"corrupt pickle: storage '0': the archive has no record 'data/0'"}),
      loader("TensorViewPastItsStorage",
             [](const std::string& dir) {
               return torch_archive(in(dir, "view_past_end.pt"), tensor_pickle(4, 2, 4, 1),
                                    {{"0", std::string(16, '\0')}});
             },
             {kPastStorage}),
      loader("TensorStrideReachesPastItsStorage",
             [](const std::string& dir) {
               return torch_archive(in(dir, "stride_past_end.pt"), tensor_pickle(4, 0, 2, 100),
                                    {{"0", std::string(16, '\0')}});
             },
             {kPastStorage}),
      loader("SafetensorsTruncatedSizeField",
             [](const std::string& dir) {
               return write_bytes(in(dir, "tiny.safetensors"), u64(2).substr(0, 5));
             },
             {"unrecognised weights format"}),
      loader("SafetensorsHeaderPastEndOfFile",
             [](const std::string& dir) {
               return write_bytes(in(dir, "header_past_end.safetensors"), u64(1000) + "{}");
             },
             {"header of 1000 bytes ends past the end of the file"}),
      loader("SafetensorsHugeHeaderSize",
             [](const std::string& dir) {
               return write_bytes(in(dir, "huge_header.safetensors"), u64(1ull << 62) + "{}");
             },
             {"exceeds the 100000000 byte limit"}),
      loader("SafetensorsTruncatedData",
             [](const std::string& dir) {
               const auto bytes = read_bytes(fixture("mha.safetensors"));
               return write_bytes(in(dir, "truncated.safetensors"),
                                  bytes.substr(0, bytes.size() - 4));
             },
             {"reach past the end of the data"}),
      loader("SafetensorsInvalidJson",
             [](const std::string& dir) {
               return write_bytes(in(dir, "json.safetensors"),
                                  safetensors_bytes("{\"a\": {\"dtype\": ", ""));
             },
             {"invalid safetensors header: [json.exception.parse_error"}),
      loader("SafetensorsHeaderNotAnObjectEntry",
             [](const std::string& dir) {
               return write_bytes(in(dir, "entry.safetensors"),
                                  safetensors_bytes("{\"a\": 3}", ""));
             },
             {"tensor 'a' is number, expected an object"}),
      loader("SafetensorsDuplicateKey",
             [](const std::string& dir) {
               const std::string entry = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
               return write_bytes(in(dir, "duplicate.safetensors"),
                                  safetensors_bytes("{\"a\":" + entry + ",\"a\":" + entry + "}",
                                                    std::string(4, '\0')));
             },
             {"duplicate key 'a'"}),
      loader("SafetensorsHostileNesting",
             [](const std::string& dir) {
               return write_bytes(
                   in(dir, "nesting.safetensors"),
                   safetensors_bytes("{\"a\":" + std::string(100000, '[') + "}", ""));
             },
             {"nested deeper than 4 levels"}),
      loader("SafetensorsMissingField",
             [](const std::string& dir) {
               return write_bytes(in(dir, "field.safetensors"),
                                  safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1]}})", ""));
             },
             {"tensor 'a' has no 'data_offsets'"}),
      loader("SafetensorsNegativeShape",
             [](const std::string& dir) {
               return write_bytes(
                   in(dir, "shape.safetensors"),
                   safetensors_bytes(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
                                     std::string(4, '\0')));
             },
             {"tensor 'a' shape entry is -1, expected a non-negative integer"}),
      loader(
          "SafetensorsShapeOverflow",
          [](const std::string& dir) {
            return write_bytes(
                in(dir, "overflow.safetensors"),
                safetensors_bytes(
                    R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                    std::string(8, '\0')));
          },
          {"shape [4294967296,4294967296] is too large"}),
      loader("SafetensorsUnknownDtype",
             [](const std::string& dir) {
               return write_bytes(
                   in(dir, "dtype.safetensors"),
                   safetensors_bytes(R"({"a":{"dtype":"F12","shape":[1],"data_offsets":[0,4]}})",
                                     std::string(4, '\0')));
             },
             {"tensor 'a' has unknown dtype 'F12'"}),
      loader("SafetensorsOffsetsPastEnd",
             [](const std::string& dir) {
               return write_bytes(
                   in(dir, "offsets.safetensors"),
                   safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                     std::string(8, '\0')));
             },
             {"tensor 'a': data_offsets [4, 12] reach past the end of the data (8 bytes after the "
              "header)"}),
      loader("SafetensorsOffsetsEndBeforeBegin",
             [](const std::string& dir) {
               return write_bytes(
                   in(dir, "reversed.safetensors"),
                   safetensors_bytes(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})",
                                     std::string(4, '\0')));
             },
             {"data_offsets [4, 0] end before they begin"}),
      loader("SafetensorsSizeDisagreesWithShape",
             [](const std::string& dir) {
               return write_bytes(
                   in(dir, "size.safetensors"),
                   safetensors_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                                     std::string(8, '\0')));
             },
             {"data_offsets [0, 8] hold 8 bytes, but shape [3] of dtype F32 needs 12"}),
      loader("SafetensorsOverlappingRanges",
             [](const std::string& dir) {
               return write_bytes(
                   in(dir, "overlap.safetensors"),
                   safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                     std::string(12, '\0')));
             },
             {"tensors 'a' [0, 8] and 'b' [4, 12] overlap"}),
      loader("SafetensorsGapBetweenRanges",
             [](const std::string& dir) {
               return write_bytes(
                   in(dir, "gap.safetensors"),
                   safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                     std::string(8, '\0')));
             },
             {"tensor 'a' starts at 4, leaving bytes [0, 4) unused"}),
      loader("SafetensorsBytesAfterTheLastTensor",
             [](const std::string& dir) {
               return write_bytes(
                   in(dir, "trailing.safetensors"),
                   safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                     std::string(6, '\0')));
             },
             {"2 bytes after the last tensor's data"}),
      loader("SafetensorsInvalidBool",
             [](const std::string& dir) {
               return write_bytes(
                   in(dir, "bool.safetensors"),
                   safetensors_bytes(R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})",
                                     std::string("\x01\x07", 2)));
             },
             {"tensor 'a' of dtype BOOL holds byte 7 at index 1"}),
      loader("SafetensorsMetadataNotStrings",
             [](const std::string& dir) {
               return write_bytes(in(dir, "metadata.safetensors"),
                                  safetensors_bytes(R"({"__metadata__":{"format":1}})", ""));
             },
             {"__metadata__ entry 'format' is 1, expected a string"}),
      loader(
          "PrefixMatchesNothing", [](const std::string&) { return fixture("encoder_layer.pt"); },
          {"prefix 'decoder.' matches no key; did you mean 'self_attn.'?",
           "The 12 keys hold 1 attention block under self_attn. (embed_dim=16)"},
          mha::LoadOptions().prefix("decoder")),
      loader(
          "PrefixMatchesNothingWithoutAttention",
          [](const std::string&) { return fixture("dtypes.pt"); },
          {"prefix 'decoder.' matches no key; the keys are 'bf16.weight', 'bool.mask', 'empty', "
           "'f16.weight', 'f32.weight', 'f64.weight', 'i64.buffer', 'scalar'"},
          mha::LoadOptions().prefix("decoder")),
      loader(
          "PrefixGuessInATorchvisionViT",
          [](const std::string&) { return fixture("library_models/vit_b_16.pth"); },
          {"prefix 'encoder.layers.0.self_attention.' matches no key; did you mean "
           "'encoder.layers.encoder_layer_0.self_attention.'?",
           "12 attention blocks under encoder.layers.encoder_layer_{0..11}.self_attention."},
          mha::LoadOptions().prefix("encoder.layers.0.self_attention.")),
      // Found by tests/fuzz (mha_fuzz_torchscript): a corrupt code/*.debug_pkl made
      // LibTorch's unpickler allocate tens of GB before the reader skipped the debug files.
      loader("TorchScriptCorruptDebugPickle",
             [](const std::string& dir) {
               return write_bytes(
                   in(dir, "debug_pkl.pt"),
                   read_bytes(MHA_FUZZ_CORPUS "/torchscript/regression-debug-pkl-length"));
             },
             {"cannot load the TorchScript archive"}),
      // Found by tests/fuzz (mha_fuzz_torchscript): a pickled string whose length
      // reaches past the end of its record. LibTorch's unpickler trusts the length
      // and allocates that much before it fails; the error still reaches the caller.
      loader("TorchScriptStringPastItsRecord",
             [](const std::string& dir) {
               return write_bytes(
                   in(dir, "string_length.pt"),
                   read_bytes(MHA_FUZZ_CORPUS "/torchscript/regression-pickle-string-length"));
             },
             {"cannot load the TorchScript archive: Unexpected end of pickler archive."})};
}

/// Loaders: the file is fine, the module does not match.
std::vector<Row> mismatched_module_rows() {
  return {
      loader(
          "SizeMismatch", [](const std::string&) { return fixture("mha.pt"); },
          {"error(s) in loading state_dict for",
           "size mismatch for in_proj_weight: copying a param with shape [48, 16] from "
           "checkpoint, the shape in current model is [24, 8]."},
          {}, opts(8, 2)),
      loader("MissingKeys",
             [](const std::string& dir) {
               return weights_of(in(dir, "no_bias.safetensors"),
                                 *MultiheadAttention(opts(16, 4).bias(false)));
             },
             {"Missing key(s) in state_dict: \"in_proj_bias\", \"out_proj.bias\".",
              "build it with mha::MultiheadAttentionOptions(16, num_heads).bias(false)"}),
      loader("UnexpectedKeys",
             [](const std::string& dir) {
               return weights_of(in(dir, "bias_kv.pt"),
                                 *MultiheadAttention(opts(16, 4).add_bias_kv(true)));
             },
             {"Unexpected key(s) in state_dict: \"bias_k\", \"bias_v\".",
              "build it with mha::MultiheadAttentionOptions(16, num_heads).add_bias_kv(true)"}),
      loader("SeparateProjectionsIntoPacked",
             [](const std::string& dir) {
               return weights_of(in(dir, "kdim.pt"), *MultiheadAttention(opts(16, 4).kdim(8)));
             },
             {"Missing key(s) in state_dict: \"in_proj_weight\".",
              "Unexpected key(s) in state_dict:", "\"k_proj_weight\"",
              "hint: the attention at '' has embed_dim=16, kdim=8, vdim=16, separate q/k/v; "
              "the module's has embed_dim=16: build it with "
              "mha::MultiheadAttentionOptions(16, num_heads).kdim(8).vdim(16)"}),
      loader(
          "CocaPoolerIntoAPackedModule",
          [](const std::string&) { return fixture("library_models/coca_vit_b_32.safetensors"); },
          {"Missing key(s) in state_dict: \"in_proj_weight\".",
           "hint: the attention at 'visual.attn_pool.attn.' has embed_dim=8, kdim=16, vdim=16, "
           "separate q/k/v",
           "build it with mha::MultiheadAttentionOptions(8, num_heads).kdim(16).vdim(16)"},
          mha::LoadOptions().prefix("visual.attn_pool.attn."), opts(8, 2)),
      loader(
          "TimmNamesWithoutKeyMap",
          [](const std::string&) { return fixture("library_models/timm_vit.safetensors"); },
          {"Unexpected key(s) in state_dict: \"proj.bias\", \"proj.weight\", \"qkv.bias\", "
           "\"qkv.weight\".",
           "the attention at 'blocks.0.attn.' has timm's qkv/proj names: load it with "
           "LoadOptions().key_map(mha::KeyMap::vit())"},
          mha::LoadOptions().prefix("blocks.0.attn.")),
      loader("WholeModelIntoOneAttention",
             [](const std::string&) { return fixture("library_models/vit_b_16.pth"); },
             {"Missing key(s) in state_dict: \"in_proj_weight\"", "... (152 in all).",
              "hint: the 152 keys hold 12 attention blocks under "
              "encoder.layers.encoder_layer_{0..11}.self_attention. (embed_dim=16); did you mean "
              "LoadOptions().prefix(\"encoder.layers.encoder_layer_0.self_attention.\")?"}),
      loader(
          "KeyMapCollision", [](const std::string&) { return fixture("mha.pt"); },
          {"keys 'in_proj_bias' and 'in_proj_weight' both map to 'in_proj_weight'"},
          mha::LoadOptions().key_map(mha::KeyMap().rename("in_proj_bias", "in_proj_weight"))),
      loader(
          "PrefixOfNothingNonStrict", [](const std::string&) { return fixture("mha.pt"); },
          {"prefix 'decoder.' matches no key; did you mean '' (no prefix)?",
           "The 4 keys hold 1 attention block with no prefix (embed_dim=16)"},
          mha::LoadOptions().prefix("decoder.").strict(false))};
}

/// mha-parity's arguments (exit status 2, the message on stderr).
std::vector<Row> parity_cli_rows() {
  const Tensor none;
  return {
      parity_cli("CliNoArguments", {},
                 {"give a bundle file, --weights FILE and --inputs FILE, or --list FILE"}),
      parity_cli("CliUnknownOption", {"--frobnicate"}, {"unknown option '--frobnicate'"}),
      parity_cli("CliOptionWithoutValue", {"--weights"}, {"--weights needs a value"}),
      parity_cli("CliNumHeadsNotANumber", {"--num-heads", "zero"},
                 {"--num-heads expects a positive integer, got 'zero'"}),
      parity_cli("CliThreadsNegative", {"--threads", "-2"},
                 {"--threads expects a positive integer, got '-2'"}),
      parity_cli("CliRtolNotANumber", {"--rtol", "abc"},
                 {"--rtol expects a number >= 0, got 'abc'"}),
      parity_cli("CliAtolNegative", {"--atol", "-1"}, {"--atol expects a number >= 0, got '-1'"}),
      parity_cli("CliTimeNaN", {"--time-s", "nan"}, {"--time-s expects a number >= 0, got 'nan'"}),
      parity_cli("CliTwoBundles", {"a.pt", "b.pt"}, {"give one bundle file, got 2: 'a.pt' 'b.pt'"}),
      parity_cli("CliBundleAndWeights", {"b.pt", "--weights", "w.pt", "--inputs", "i.safetensors"},
                 {"give a bundle or --weights and --inputs, not both"}),
      parity_cli("CliWeightsWithoutNumHeads", {"--weights", "w.pt", "--inputs", "i.safetensors"},
                 {"--num-heads is required with --weights"}),
      parity_cli("CliMissingBundle", {"{fixtures}/no_such_bundle.pt"},
                 {"no_such_bundle.pt cannot be opened"}),
      parity_cli("CliNotABundle", {"{fixtures}/mha.pt"},
                 {"mha.pt: not a bundle of scripts/export_reference.py --bundle"}),
      parity_cli("CliMissingWeights",
                 {"--weights", "{fixtures}/none.pt", "--inputs",
                  "{fixtures}/encoder_layer.io.safetensors", "--num-heads", "4"},
                 {"none.pt: no such file"}),
      parity_cli("CliInputsWithoutQuery",
                 {"--weights", "{fixtures}/encoder_layer.pt", "--prefix", "self_attn.", "--inputs",
                  "{fixtures}/mha.pt", "--num-heads", "4"},
                 {"mha.pt: no tensor 'query' (expected query, key, value)"}),
      parity_cli("CliPrefixWithoutWeights",
                 {"--weights", "{fixtures}/encoder_layer.pt", "--prefix", "nope.", "--inputs",
                  "{fixtures}/encoder_layer.io.safetensors", "--num-heads", "4"},
                 {"encoder_layer.pt: prefix 'nope.' matches no key; did you mean 'self_attn.'?"}),
      parity_cli("CliPrefixWithoutAttention",
                 {"--weights", "{fixtures}/encoder_layer.pt", "--prefix", "linear1.", "--inputs",
                  "{fixtures}/encoder_layer.io.safetensors", "--num-heads", "4"},
                 {"encoder_layer.pt: no attention block under prefix 'linear1.'; the file has 1 "
                  "attention block under self_attn. (embed_dim=16) (mha-parity --list"}),
      parity_cli("CliQkvProjNamesWithoutVit",
                 {"--weights", "{fixtures}/vit_block.pt", "--prefix", "attn.", "--inputs",
                  "{fixtures}/vit_block.attn.io.safetensors", "--num-heads", "4"},
                 {"vit_block.pt: the attention under prefix 'attn.' has timm's qkv/proj names: "
                  "add --vit"}),
      parity_cli("CliListWithoutAttention", {"--list", "{fixtures}/dtypes.pt"},
                 {"dtypes.pt: no attention block among its 8 keys"}),
      parity_cli("CliListMissingFile", {"--list", "{fixtures}/none.pt"}, {"none.pt: no such file"}),
      parity_cli("CliListWithOtherArguments", {"--list", "a.pt", "--weights", "w.pt"},
                 {"give --list FILE alone, without a bundle, --weights or --inputs"}),
      parity_cli(
          "CliEmbedDimDisagrees",
          {"--weights", "{fixtures}/encoder_layer.pt", "--prefix", "self_attn.", "--inputs",
           "{fixtures}/encoder_layer.io.safetensors", "--num-heads", "4", "--embed-dim", "8"},
          {"--embed-dim 8 but the weights have embed_dim 16"}),
      parity_cli("CliNumHeadsNotDividing",
                 {"--weights", "{fixtures}/encoder_layer.pt", "--prefix", "self_attn.", "--inputs",
                  "{fixtures}/encoder_layer.io.safetensors", "--num-heads", "3"},
                 {"embed_dim must be divisible by num_heads, got embed_dim=16 and num_heads=3"})};
}

/// Every row, one table per subsystem.
std::vector<Row> rows() {
  std::vector<Row> all;
  for (auto table : {construction_rows, input_rows, key_padding_mask_rows, attn_mask_rows,
                     functional_rows, bad_file_rows, mismatched_module_rows, parity_cli_rows}) {
    for (auto& row : table()) all.push_back(std::move(row));
  }
  return all;
}

bool of_kind(const c10::Error& e, Kind kind) {
  switch (kind) {
    case Kind::kValueError:
      return dynamic_cast<const c10::ValueError*>(&e) != nullptr;
    case Kind::kTypeError:
      return dynamic_cast<const c10::TypeError*>(&e) != nullptr;
    case Kind::kIndexError:
      return dynamic_cast<const c10::IndexError*>(&e) != nullptr;
    default:  // a plain c10::Error: Python's RuntimeError
      return dynamic_cast<const c10::ValueError*>(&e) == nullptr &&
             dynamic_cast<const c10::TypeError*>(&e) == nullptr &&
             dynamic_cast<const c10::IndexError*>(&e) == nullptr;
  }
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kValueError:
      return "c10::ValueError";
    case Kind::kTypeError:
      return "c10::TypeError";
    case Kind::kIndexError:
      return "c10::IndexError";
    case Kind::kExitStatus2:
      return "exit status 2";
    default:
      return "c10::Error";
  }
}

/// gtest prints a row by its name.
void PrintTo(const Row& row, std::ostream* os) { *os << row.name; }

struct BadInputTable : mha::test::SeedingFixture, ::testing::WithParamInterface<Row> {};

/// Runs mha-parity with `args` ("{fixtures}" replaced); returns its exit status
/// and what it wrote to stderr.
std::pair<int, std::string> run_parity_cli(std::vector<std::string> args) {
  std::string command = "'" MHA_PARITY_CLI "'";
  for (auto& arg : args) {
    const auto at = arg.find("{fixtures}");
    if (at != std::string::npos) arg.replace(at, 10, MHA_STATE_DICT_FIXTURES);
    command += " '" + arg + "'";
  }
  command += " 2>&1 >/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed: " + command};
  std::string err;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) err.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, err};
}

void expect_contains_all(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "error message:\n  " << message << "\ndoes not contain:\n  " << part;
  }
}

TEST_P(BadInputTable, RaisesNamingTheArgumentAndChangesNothing) {
  const Row& row = GetParam();
  if (!row.cli.empty() || row.kind == Kind::kExitStatus2) {
    const auto [status, err] = run_parity_cli(row.cli);
    EXPECT_EQ(status, 2) << "mha-parity's stderr:\n" << err;
    expect_contains_all(err, row.message);
    return;
  }
  MultiheadAttention m{nullptr};
  if (row.call || row.file) m = MultiheadAttention(row.options);
  const Inputs inputs;
  const auto state_before = m ? mha::support::snapshot(*m) : mha::support::ModuleState{};
  const bool training_before = m && m->is_training();
  const Tensor rng_before = at::detail::getDefaultCPUGenerator().get_state();  // after the inputs

  const std::string file =
      row.file ? row.file(mha::test::scratch_dir("bad_input_table/" + row.name)) : "";
  bool thrown = false;
  try {
    if (row.file) {
      mha::load_state_dict(m, file, row.load_options);  // the holder overload
    } else if (row.call) {
      row.call(m, inputs);
    } else {
      MultiheadAttention attempt(row.options);
    }
  } catch (const c10::Error& e) {
    thrown = true;
    const std::string message = e.what_without_backtrace();
    EXPECT_TRUE(of_kind(e, row.kind))
        << "expected a " << kind_name(row.kind) << ", got: " << message;
    expect_contains_all(message, row.message);
    if (row.file) {
      EXPECT_EQ(message.rfind(file + ": ", 0), 0u)
          << "the message does not start with the file:\n  " << message;
    }
  }
  ASSERT_TRUE(thrown) << "expected a " << kind_name(row.kind) << " containing: " << row.message[0];

  if (!m) {
    // Forward rows draw their own arguments; a construction row draws nothing.
    EXPECT_TRUE(
        mha::test::bitwise_equal(at::detail::getDefaultCPUGenerator().get_state(), rng_before))
        << "a failed construction moved the global generator";
    return;
  }
  EXPECT_EQ(m->is_training(), training_before);
  const auto state_after = mha::support::snapshot(*m);
  ASSERT_EQ(state_after.size(), state_before.size());
  const auto params = m->named_parameters();
  for (size_t i = 0; i < state_after.size(); ++i) {
    const auto& [name, before] = state_before[i];
    EXPECT_EQ(state_after[i].first, name);
    // A row may change the module's dtype first (QueryFloatOnDoubleModule): compare values.
    EXPECT_TRUE(mha::test::bitwise_equal(state_after[i].second.to(before.scalar_type()), before))
        << name << " changed";
    if (params.contains(name)) {
      EXPECT_TRUE(params[name].requires_grad()) << name;
      EXPECT_FALSE(params[name].grad().defined()) << name << " got a gradient";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Rows,
                         BadInputTable,
                         ::testing::ValuesIn(rows()),
                         [](const ::testing::TestParamInfo<Row>& info) { return info.param.name; });

// The Transformer table: layers, stacks and cached decoding
// (mha/transformer.h). Each row calls one of the subjects below; afterwards
// every subject's parameters, buffers and mode are unchanged, and so are the
// decoder caches: same lengths and batch, and a valid next step gives, bit for
// bit, what the same step gives on a twin cache that saw no failed call.

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
  bool thrown = false;
  try {
    row.call(subjects);
  } catch (const c10::Error& e) {
    thrown = true;
    const std::string message = e.what_without_backtrace();
    EXPECT_TRUE(of_kind(e, row.kind))
        << "expected a " << kind_name(row.kind) << ", got: " << message;
    expect_contains_all(message, row.message);
  }
  ASSERT_TRUE(thrown) << "expected a " << kind_name(row.kind) << " containing: " << row.message[0];
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

TEST(BadInputTableSize, HasAtLeastFiftyRowsAcrossEveryKind) {
  const auto all = rows();
  EXPECT_GE(all.size(), 50u);
  const auto count = [&](auto&& pred) { return std::count_if(all.begin(), all.end(), pred); };
  EXPECT_GE(count([](const Row& r) {
              return !r.call && !r.file && r.cli.empty() && r.kind != Kind::kExitStatus2;
            }),
            10);  // construction
  EXPECT_GE(count([](const Row& r) { return static_cast<bool>(r.call); }),
            40);  // forward, masks, functional
  EXPECT_GE(count([](const Row& r) { return static_cast<bool>(r.file); }), 40);     // loaders
  EXPECT_GE(count([](const Row& r) { return r.kind == Kind::kExitStatus2; }), 15);  // mha-parity
}

TEST(BadInputTableSize, TransformerTableCoversLayersStacksAndCachedDecoding) {
  const auto all = transformer_rows();
  const auto cached = std::count_if(all.begin(), all.end(), [](const TransformerRow& r) {
    return r.name.rfind("Cached", 0) == 0;
  });
  EXPECT_GE(all.size() - static_cast<size_t>(cached), 20u);  // construction, layers, stacks
  EXPECT_GE(cached, 20);
}

}  // namespace
