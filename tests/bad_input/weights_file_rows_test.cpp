// The loaders' bad-input rows: bad files (the message starts with the file's
// path) and files that do not fit the module (bad_input/bad_input_table.h).
// Each row's file is made for it, some from the checkpoints of
// scripts/export_test_checkpoints.py.

#include "bad_input/bad_input_table.h"
#include "weights_files.h"

namespace mha {
namespace test {
namespace bad_input {
namespace {

using mha::test::binunicode;
using mha::test::fixture;
using mha::test::read_bytes;
using mha::test::safetensors_bytes;
using mha::test::tensor_pickle;
using mha::test::torch_archive;
using mha::test::u64;
using mha::test::write_bytes;

std::string in(const std::string& dir, const std::string& name) { return dir + "/" + name; }

/// A file of `module`'s weights (as save_state_dict writes it).
std::string weights_of(const std::string& path, const torch::nn::Module& module) {
  mha::save_state_dict(module, path);
  return path;
}

// Views that reach past their storage (the check of pickle_tensors.cpp).
constexpr const char* kPastStorage = "reaches past its storage: the storage holds 16 bytes";

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
      // and allocates that much; the reader's scan of data.pkl refuses it first.
      loader("TorchScriptStringPastItsRecord",
             [](const std::string& dir) {
               return write_bytes(
                   in(dir, "string_length.pt"),
                   read_bytes(MHA_FUZZ_CORPUS "/torchscript/regression-pickle-string-length"));
             },
             {"cannot load the TorchScript archive: data.pkl: offset 66: corrupt pickle: "
              "truncated: 1862270990 bytes needed, 727 left"}),
      // Found by the replay of tests/fuzz's corpus: a storage id whose key or count
      // was corrupt, which LibTorch's unpickler turns into a 64-byte storage over a
      // 16-byte record (a read past the buffer, seen by no check after the load).
      loader("TorchScriptStoragePastItsRecord",
             [](const std::string& dir) {
               return write_bytes(
                   in(dir, "view_past_storage.pt"),
                   read_bytes(MHA_FUZZ_CORPUS "/torchscript/regression-view-past-storage"));
             },
             {"cannot load the TorchScript archive: data.pkl: offset ",
              "claims 16 elements of Float", "but its record 'data/"})};
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

}  // namespace

std::vector<Row> weights_file_rows() {
  std::vector<Row> all;
  for (auto table : {bad_file_rows, mismatched_module_rows}) {
    for (auto& row : table()) all.push_back(std::move(row));
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(WeightsFiles,
                         BadInputTable,
                         ::testing::ValuesIn(weights_file_rows()),
                         row_name);

}  // namespace bad_input
}  // namespace test
}  // namespace mha
