#pragma once

// mha-parity --list FILE|DIR: the attention blocks of a weights file, or of a
// Hugging Face model directory, as a table, and the C++ that loads them.

#include <string>

namespace mha {
namespace parity_tool {

/// Prints the attention blocks of the weights file `path` (mha::find_attention_blocks)
/// or of the Hugging Face model directory `path` (mha::hf_attention_blocks),
/// one row per block, and how to load one. Throws c10::Error starting with
/// `path` when the file cannot be read or holds no attention block.
void list_attention_blocks(const std::string& path);

}  // namespace parity_tool
}  // namespace mha
