#include "list_blocks.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mha/attention_blocks.h>
#include <mha/hf_models.h>
#include <mha/hugging_face.h>

#include <algorithm>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "dtype_names.h"

namespace mha {
namespace parity_tool {
namespace {

using Row = std::vector<std::string>;

/// `text`'s lines.
std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t begin = 0;
  for (size_t end = text.find('\n'); end != std::string::npos; end = text.find('\n', begin)) {
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  lines.push_back(text.substr(begin));
  return lines;
}

const char* python_bool(bool value) { return value ? "True" : "False"; }

Row row_of(const AttentionBlock& block) {
  return {block.prefix.empty() ? "''" : block.prefix,
          block.naming == AttentionNaming::kQkvProj ? "qkv/proj (--vit)" : "MultiheadAttention",
          std::to_string(block.embed_dim),
          std::to_string(block.kdim),
          std::to_string(block.vdim),
          python_bool(block.bias),
          python_bool(block.add_bias_kv),
          python_bool(block.packed),
          support::dtype_name(block.dtype)};
}

/// The rows with each column padded to its widest cell.
void print_table(const std::vector<Row>& rows) {
  std::vector<size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += c + 1 < row.size() ? fmt::format("{:<{}}  ", row[c], widths[c]) : row[c];
    }
    fmt::print("  {}\n", line);
  }
}

/// The C++ of one block of each kind (naming and options), indented.
void print_load_code(const std::vector<AttentionBlock>& blocks, const std::string& path) {
  std::set<std::string> shown;
  for (const auto& block : blocks) {
    const std::string code = block.load_code(path);
    const std::string kind = code.substr(0, code.find(';'));
    if (shown.insert(kind).second) {
      fmt::print("  {}\n", fmt::join(std::vector<std::string>{code.substr(0, code.find('\n')),
                                                              code.substr(code.find('\n') + 1)},
                                     "\n  "));
    }
  }
}

void list_hf_checkpoint(const std::string& dir) {
  const HfCheckpoint checkpoint = read_hf_checkpoint(dir);
  std::set<std::string> dtypes;
  for (const auto& item : checkpoint.tensors) {
    const auto dtype = item.second.scalar_type();
    dtypes.insert(c10::isFloatingType(dtype) ? support::dtype_name(dtype) : c10::toString(dtype));
  }
  fmt::print("mha-parity: {}: Hugging Face model_type '{}' ({}: {} tensors, {})\n", dir,
             checkpoint.model_type, fmt::join(checkpoint.weight_files, ", "),
             checkpoint.tensors.size(), fmt::join(dtypes, ", "));
  const std::string code = hf_load_code(checkpoint);
  if (code.empty()) {
    fmt::print("model_type '{}' is not supported; supported (mha::load_hf_model): {}\n",
               checkpoint.model_type, fmt::join(hf_model_types(), ", "));
    const auto blocks = find_attention_blocks(checkpoint.tensors);
    fmt::print("by their names, the tensors hold {}\n", summarize_attention_blocks(blocks));
    return;
  }
  std::vector<Row> rows{{"prefix", "module", "embed_dim", "num_heads", "dtype"}};
  for (const auto& block : hf_attention_blocks(checkpoint)) {
    rows.push_back({block.prefix, block.module, std::to_string(block.options.embed_dim()),
                    std::to_string(block.options.num_heads()), support::dtype_name(block.dtype)});
  }
  print_table(rows);
  fmt::print(
      "Options from config.json; separate q/k/v become in_proj_weight. Load it in C++:\n"
      "  {}\n",
      fmt::join(split_lines(code), "\n  "));
}

}  // namespace

void list_attention_blocks(const std::string& path) {
  if (is_hf_checkpoint(path)) {
    list_hf_checkpoint(path);
    return;
  }
  const auto state_dict = read_state_dict(path);
  const auto blocks = find_attention_blocks(state_dict);
  TORCH_CHECK(!blocks.empty(),
              fmt::format("{}: no attention block among its {} keys (none has the names of "
                          "nn.MultiheadAttention or of timm's qkv/proj attention)",
                          path, state_dict.size()));
  fmt::print("mha-parity: {} ({} keys): {}\n", path, state_dict.size(),
             summarize_attention_blocks(blocks));
  std::vector<Row> rows{
      {"prefix", "naming", "embed_dim", "kdim", "vdim", "bias", "add_bias_kv", "packed", "dtype"}};
  std::transform(blocks.begin(), blocks.end(), std::back_inserter(rows), row_of);
  print_table(rows);
  fmt::print(
      "num_heads is not stored in a state_dict: take it from the model's configuration.\n"
      "Load a block with --prefix PREFIX --num-heads H (and --vit for qkv/proj), or in C++:\n");
  print_load_code(blocks, path);
}

}  // namespace parity_tool
}  // namespace mha
