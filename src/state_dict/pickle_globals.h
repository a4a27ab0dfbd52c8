#pragma once

// The globals a weights-only pickle may name, and what REDUCE, NEWOBJ and
// BUILD do with them: the allow-list of torch/_weights_only_unpickler.py
// (`_get_allowed_globals`), evaluated without executing anything.

#include <string>
#include <string_view>

#include "state_dict/pickle_value.h"

namespace mha {
namespace detail {

/// The value of the allow-listed global `full_name` ("module.name", with
/// Python 2's `__builtin__` already mapped to `builtins`), or nullptr when it
/// is not allow-listed.
Value* resolve_global(const std::string& full_name, ValueArena& arena);

/// Throws `c10::Error` for the global `full_name`, which is not allow-listed:
/// a whole pickled module (the pickle names `torch.nn.modules` classes) gets
/// its own message.
[[noreturn]] void reject_global(const std::string& full_name, std::string_view pickle);

/// REDUCE: `func(*args)`; `args` must be a tuple.
Value* apply_reduce(const Value& func, const Value& args, ValueArena& arena);

/// NEWOBJ: `cls.__new__(cls, *args)`; `args` must be a tuple.
Value* apply_newobj(const Value& cls, const Value& args, ValueArena& arena);

/// BUILD: sets the state of `instance`; the state of the objects this reader
/// keeps (an OrderedDict's `__dict__`, such as a state_dict's `_metadata`) is
/// ignored, a BUILD Python would refuse is an error.
void apply_build(const Value& instance, const Value& state);

/// pickle_tensors.cpp: the tensor that the allow-listed rebuild function
/// `name` (torch._utils._rebuild_tensor_v2, ...) returns for `args`.
Value* rebuild_tensor(const std::string& name, const Value& args, ValueArena& arena);

/// True for the rebuild functions of `rebuild_tensor`.
bool is_tensor_rebuild(const std::string& name);

}  // namespace detail
}  // namespace mha
