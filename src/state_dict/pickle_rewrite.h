#pragma once

// Makes the `data.pkl` of a `torch.save` archive readable by LibTorch's
// unpickler (torch::jit::Unpickler), which maps `collections.OrderedDict` to
// None and so cannot read `torch.save(model.state_dict())`.

#include <string>
#include <string_view>

namespace mha {
namespace detail {

/// Checks the structure of a protocol-2 pickle and rewrites its
/// `collections.OrderedDict` objects into plain dicts (see the .cpp for the
/// approach). The state an OrderedDict was given after its items (its
/// `__dict__`, e.g. a state_dict's `_metadata`) ends up in that dict under the
/// key `True`, which is not a string, so it is never taken for a tensor name.
///
/// Throws `c10::Error` (without the file name) for a malformed pickle: a
/// truncated opcode, an unknown opcode, a stack or mark underflow, an odd
/// number of dict items, a memo index out of order, nesting deeper than
/// `kMaxPickleDepth`, an unsupported use of OrderedDict.
std::string rewrite_ordered_dicts(std::string_view pickle);

/// Deepest container nesting accepted (the unpickler's IValues are destroyed
/// recursively).
constexpr int kMaxPickleDepth = 1000;

}  // namespace detail
}  // namespace mha
