// mha-parity's bad-input rows: exit status 2 and the message on stderr
// (bad_input/bad_input_table.h).

#include "bad_input/bad_input_table.h"

namespace mha {
namespace test {
namespace bad_input {

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

INSTANTIATE_TEST_SUITE_P(ParityCli,
                         BadInputTable,
                         ::testing::ValuesIn(parity_cli_rows()),
                         row_name);

}  // namespace bad_input
}  // namespace test
}  // namespace mha
