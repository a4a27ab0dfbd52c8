#pragma once

// Private: what the encoder and decoder stacks share: building their layers
// and final norm as Python's `TransformerEncoder`/`TransformerDecoder` do.

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cstdint>

#include "common/generator_state.h"

namespace mha {
namespace detail {

/// Registers `stack`'s `layers` (`num_layers` deep copies of `layer`, as
/// Python's `_get_clones`: the copies draw no random numbers) and, when
/// given, a copy of `norm` as its `norm`.
template <typename Stack, typename Layer>
void register_stack_parts(Stack& stack,
                          const Layer& layer,
                          int64_t num_layers,
                          const torch::nn::AnyModule& norm) {
  TORCH_CHECK(num_layers >= 0,
              fmt::format("num_layers must be non-negative, but got {}", num_layers));
  stack.layers = stack.register_module("layers", torch::nn::ModuleList());
  const NoDrawsGuard no_draws;
  for (int64_t i = 0; i < num_layers; ++i) stack.layers->push_back(layer->clone());
  if (!norm.is_empty()) {
    stack.norm = norm.clone();
    stack.register_module("norm", stack.norm.ptr());
  }
}

}  // namespace detail
}  // namespace mha
