#pragma once

// The values a weights-only pickle builds (pickle_reader.h): the subset of
// Python objects that `torch.load(weights_only=True)` can return
// (torch/_weights_only_unpickler.py), with tensors as LibTorch tensors.

#include <c10/core/ScalarType.h>
#include <c10/core/Storage.h>
#include <torch/types.h>

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace mha {
namespace detail {

enum class ValueKind : uint8_t {
  kNone,
  kBool,
  kInt,     ///< fits in int64
  kBigInt,  ///< beyond int64 (LONG1)
  kFloat,
  kStr,
  kBytes,
  kList,
  kTuple,  ///< also torch.Size (type_name "torch.Size")
  kDict,   ///< dict, collections.OrderedDict, collections.Counter
  kSet,
  kGlobal,  ///< an allow-listed global (pickle_globals.h)
  kStorage,
  kTensor,
  kObject,  ///< any other allowed value (complex, bytearray, torch.device, ...): opaque
};

/// What an allow-listed global is.
enum class GlobalRole : uint8_t {
  kCallable,     ///< a function or class applied by REDUCE or NEWOBJ
  kDtype,        ///< torch.float32, ...
  kStorageType,  ///< torch.FloatStorage, torch.storage.UntypedStorage, ...
  kConstant,     ///< a legacy tensor class or a quantization scheme
  /// A TorchScript class or helper (`__torch__.*`, `torch.jit._pickle.*`) in a
  /// pickle only scanned for its storages: calls and NEWOBJ make opaque objects.
  kScriptClass,
};

/// One pickled value. Values refer to each other by pointer; all are owned by
/// a `ValueArena`, so shared and even cyclic references need no ownership.
struct Value {
  ValueKind kind = ValueKind::kNone;
  GlobalRole role = GlobalRole::kConstant;  ///< kGlobal
  int64_t integer = 0;                      ///< kBool (0/1), kInt
  double real = 0;                          ///< kFloat
  /// kStr, kBytes: the bytes; kBigInt: decimal text; kGlobal: "module.name";
  /// kTuple, kObject: the Python type of a non-plain value ("torch.Size", ...).
  std::string text;
  std::vector<Value*> items;  ///< kList, kTuple, kSet; kDict: key, value, key, value, ...
  /// kGlobal of a dtype or storage type (Undefined when LibTorch lacks it), kStorage.
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  c10::Storage storage;  ///< kStorage
  torch::Tensor tensor;  ///< kTensor
};

/// Owns the values of one pickle: at most one per opcode, so their number is
/// bounded by the pickle's size. Copies of containers (`OrderedDict(d)`,
/// `set(list)`) are charged against a budget of items, so that a short pickle
/// cannot copy one big container again and again.
class ValueArena {
 public:
  explicit ValueArena(size_t copy_budget) : copy_budget_(copy_budget) {}

  Value* make(ValueKind kind) {
    values_.emplace_back();
    values_.back().kind = kind;
    return &values_.back();
  }

  /// `to->items = from`, charged against the budget ("unsupported" past it).
  void copy_items(Value& to, const std::vector<Value*>& from);

 private:
  std::deque<Value> values_;
  size_t copy_budget_;
};

/// Throws `c10::Error` "corrupt pickle: <what>": the bytes are not a pickle
/// that Python's unpickler could read.
[[noreturn]] void pickle_corrupt(std::string_view what);

/// Throws `c10::Error` "corrupt pickle: ..." unless the view (`sizes`,
/// `strides`, `offset`, in elements of `item_size` bytes) lies inside a
/// storage of `storage_bytes` bytes: no negative offset, size or stride, no
/// overflow, the last element addressed within the bytes.
void check_view(const std::vector<int64_t>& sizes,
                const std::vector<int64_t>& strides,
                int64_t offset,
                int64_t item_size,
                size_t storage_bytes);

/// Throws `c10::Error` "unsupported: <what>": a valid pickle this reader does
/// not (or may not) read.
[[noreturn]] void pickle_unsupported(std::string_view what);

}  // namespace detail
}  // namespace mha
