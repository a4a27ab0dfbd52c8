#include "list_blocks.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mha/attention_blocks.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <string>
#include <vector>

namespace mha {
namespace parity_tool {
namespace {

using Row = std::array<std::string, 8>;

const char* python_bool(bool value) { return value ? "True" : "False"; }

Row row_of(const AttentionBlock& block) {
  return {block.prefix.empty() ? "''" : block.prefix,
          block.naming == AttentionNaming::kQkvProj ? "qkv/proj (--vit)" : "MultiheadAttention",
          std::to_string(block.embed_dim),
          std::to_string(block.kdim),
          std::to_string(block.vdim),
          python_bool(block.bias),
          python_bool(block.add_bias_kv),
          python_bool(block.packed)};
}

/// The rows with each column padded to its widest cell.
void print_table(const std::vector<Row>& rows) {
  Row widths;
  for (size_t c = 0; c < widths.size(); ++c) {
    size_t width = 0;
    for (const auto& row : rows) {
      width = std::max(width, row[c].size());
    }
    widths[c] = std::string(width, ' ');
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c] + (c + 1 < row.size() ? widths[c].substr(row[c].size()) + "  " : "");
    }
    fmt::print("  {}\n", line);
  }
}

}  // namespace

void list_attention_blocks(const std::string& path) {
  const auto state_dict = read_state_dict(path);
  const auto blocks = find_attention_blocks(state_dict);
  TORCH_CHECK(!blocks.empty(),
              fmt::format("{}: no attention block among its {} keys (none has the names of "
                          "nn.MultiheadAttention or of timm's qkv/proj attention)",
                          path, state_dict.size()));
  fmt::print("mha-parity: {} ({} keys): {}\n", path, state_dict.size(),
             summarize_attention_blocks(blocks));
  std::vector<Row> rows{
      {"prefix", "naming", "embed_dim", "kdim", "vdim", "bias", "add_bias_kv", "packed"}};
  std::transform(blocks.begin(), blocks.end(), std::back_inserter(rows), row_of);
  print_table(rows);
  fmt::print(
      "num_heads is not stored in a state_dict: take it from the model's configuration.\n"
      "Load a block with --prefix PREFIX --num-heads H (and --vit for qkv/proj), or in C++:\n"
      "  mha::load_state_dict(attn, FILE, mha::LoadOptions().prefix(\"PREFIX\"));\n");
}

}  // namespace parity_tool
}  // namespace mha
