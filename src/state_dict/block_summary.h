#pragma once

// How attention blocks are ordered and described in messages and tables.

#include <mha/attention_blocks.h>

#include <string>

namespace mha {
namespace detail {

/// `a < b` with runs of digits compared as numbers: "layers.2." < "layers.10.".
bool natural_less(const std::string& a, const std::string& b);

/// The options a block's tensors imply, shortly: "embed_dim=8, kdim=16,
/// vdim=16, separate q/k/v"; defaults are left out.
std::string describe_options(const AttentionBlock& block);

/// The C++ that builds a module for `block`:
/// "mha::MultiheadAttentionOptions(8, num_heads).kdim(16).vdim(16)".
std::string options_code(const AttentionBlock& block);

}  // namespace detail
}  // namespace mha
