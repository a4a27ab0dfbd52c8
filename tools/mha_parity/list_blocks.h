#pragma once

// mha-parity --list FILE: the attention blocks of a weights file as a table.

#include <string>

namespace mha {
namespace parity_tool {

/// Prints the attention blocks of the weights file `path` (mha::find_attention_blocks),
/// one row per block, and how to load one. Throws c10::Error starting with
/// `path` when the file cannot be read or holds no attention block.
void list_attention_blocks(const std::string& path);

}  // namespace parity_tool
}  // namespace mha
