#pragma once

// A reader for the pickles of `torch.save` archives (their data.pkl) that
// accepts exactly the opcodes and globals of PyTorch's weights-only unpickler
// (torch/_weights_only_unpickler.py, what `torch.load(weights_only=True)`
// reads) and executes nothing: globals are looked up in a fixed allow-list
// (pickle_globals.h) and never imported, "calls" build values or tensor views.
//
// Bounds: every length is checked against the bytes left before anything is
// allocated; each opcode creates at most one value; memo indices are keys of a
// map (no table sized by an index); storages come from `StorageLoader`, which
// checks them against the archive's records.

#include <c10/core/Storage.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "state_dict/pickle_value.h"

namespace mha {
namespace detail {

/// persistent_load of a storage: the record `key` as a storage of `numel`
/// elements of `dtype` (at least that many bytes), on the CPU or, to read
/// sizes only, on the meta device. Called once per key.
using StorageLoader =
    std::function<c10::Storage(const std::string& key, c10::ScalarType dtype, int64_t numel)>;

/// How a pickle is read: a torch.save archive's, weights only (the allow-list
/// above, each storage key loaded once, as Python's persistent_load); or a
/// TorchScript archive's data.pkl, scanned only to check its storages before
/// LibTorch's unpickler reads it: any other global is an opaque TorchScript class
/// (GlobalRole::kScriptClass), and every storage id is loaded, as LibTorch's
/// unpickler reads the record again for each.
enum class PickleDialect { kWeightsOnly, kTorchScriptScan };

/// Reads `pickle` and returns the value STOP returns; all values live in
/// `arena`. Throws `c10::Error` "offset <n>: corrupt pickle: ..." or
/// "offset <n>: unsupported: ...", <n> being the offset of the opcode.
Value* read_weights_pickle(std::string_view pickle,
                           const StorageLoader& load_storage,
                           ValueArena& arena,
                           PickleDialect dialect = PickleDialect::kWeightsOnly);

}  // namespace detail
}  // namespace mha
