#pragma once

// The naming rules of `mha::read_state_dict` (documented in mha/state_dict.h):
// the dotted name of every tensor a pickled value holds, and the paths of the
// tensors the rules skip.

#include <mha/state_dict.h>

#include "state_dict/pickle_value.h"

namespace mha {
namespace detail {

/// Adds the tensors reachable from `root` to `out.tensors` by dotted name and
/// the paths of the skipped ones to `out.skipped`. The names built are bounded
/// by the size of the pickle (`pickle_bytes`), as sharing could otherwise
/// multiply them. Throws `c10::Error` "unsupported: ..." when two paths give
/// the same name, a container contains itself or nests deeper than 1000
/// levels, or the names would outgrow that bound.
void name_tensors(const Value& root, size_t pickle_bytes, ReadResult& out);

}  // namespace detail
}  // namespace mha
