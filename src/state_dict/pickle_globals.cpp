#include "state_dict/pickle_globals.h"

#include <c10/core/ScalarType.h>
#include <fmt/format.h>

#include <iterator>
#include <unordered_map>
#include <utility>

namespace mha {
namespace detail {
namespace {

struct Allowed {
  GlobalRole role;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
};
using AllowList = std::unordered_map<std::string, Allowed>;

constexpr auto kNoDtype = c10::ScalarType::Undefined;

/// `torch.<name>` dtypes: those of `torch.storage._dtype_to_storage_type_map()`,
/// `_new_dtypes()`, int1..int7 and uint1..uint7. Undefined: not read (quantized,
/// sub-byte and bit types).
void add_dtypes(AllowList& list) {
  const std::pair<const char*, c10::ScalarType> dtypes[] = {
      {"float64", c10::kDouble},
      {"float32", c10::kFloat},
      {"float16", c10::kHalf},
      {"bfloat16", c10::kBFloat16},
      {"int64", c10::kLong},
      {"int32", c10::kInt},
      {"int16", c10::kShort},
      {"int8", c10::kChar},
      {"uint8", c10::kByte},
      {"bool", c10::kBool},
      {"complex64", c10::kComplexFloat},
      {"complex128", c10::kComplexDouble},
      {"complex32", c10::kComplexHalf},
      {"uint16", c10::kUInt16},
      {"uint32", c10::kUInt32},
      {"uint64", c10::kUInt64},
      {"float8_e5m2", c10::kFloat8_e5m2},
      {"float8_e4m3fn", c10::kFloat8_e4m3fn},
      {"float8_e5m2fnuz", c10::kFloat8_e5m2fnuz},
      {"float8_e4m3fnuz", c10::kFloat8_e4m3fnuz},
      {"float8_e8m0fnu", c10::kFloat8_e8m0fnu},
      {"float4_e2m1fn_x2", kNoDtype},
      {"bits8", kNoDtype},
      {"bits16", kNoDtype},
      {"bits1x8", kNoDtype},
      {"bits2x4", kNoDtype},
      {"bits4x2", kNoDtype},
      {"qint8", kNoDtype},
      {"quint8", kNoDtype},
      {"qint32", kNoDtype},
      {"quint4x2", kNoDtype},
      {"quint2x4", kNoDtype}};
  for (const auto& [name, dtype] : dtypes) {
    list.emplace(fmt::format("torch.{}", name), Allowed{GlobalRole::kDtype, dtype});
  }
  for (int bits = 1; bits <= 7; ++bits) {
    list.emplace(fmt::format("torch.int{}", bits), Allowed{GlobalRole::kDtype});
    list.emplace(fmt::format("torch.uint{}", bits), Allowed{GlobalRole::kDtype});
  }
}

/// The storage classes (`torch._storage_classes`) and the legacy tensor
/// classes (`torch._tensor_classes`), CPU and CUDA.
void add_storage_and_tensor_classes(AllowList& list) {
  // Named as c10 names the dtype ("Double", ...); the legacy tensor classes
  // are those of the first nine (and BoolTensor, not sparse).
  const c10::ScalarType storages[] = {c10::kDouble,   c10::kFloat,        c10::kHalf,
                                      c10::kBFloat16, c10::kLong,         c10::kInt,
                                      c10::kShort,    c10::kChar,         c10::kByte,
                                      c10::kBool,     c10::kComplexFloat, c10::kComplexDouble};
  constexpr size_t kTensorClasses = 9;
  for (const char* device : {"torch.", "torch.cuda."}) {
    for (size_t i = 0; i < std::size(storages); ++i) {
      const char* name = c10::toString(storages[i]);
      list.emplace(fmt::format("{}{}Storage", device, name),
                   Allowed{GlobalRole::kStorageType, storages[i]});
      if (i < kTensorClasses) {
        list.emplace(fmt::format("{}{}Tensor", device, name), Allowed{GlobalRole::kConstant});
        list.emplace(fmt::format("{}sparse.{}Tensor", device, name),
                     Allowed{GlobalRole::kConstant});
      }
    }
    list.emplace(fmt::format("{}BoolTensor", device), Allowed{GlobalRole::kConstant});
  }
  for (const char* name : {"QUInt8", "QInt8", "QInt32", "QUInt4x2", "QUInt2x4"}) {
    list.emplace(fmt::format("torch.{}Storage", name), Allowed{GlobalRole::kStorageType});
  }
  list.emplace("torch.storage.UntypedStorage", Allowed{GlobalRole::kStorageType, c10::kByte});
  list.emplace("torch.storage.TypedStorage", Allowed{GlobalRole::kConstant});
}

const AllowList& allow_list() {
  static const AllowList list = [] {
    AllowList out;
    for (const char* name : {"collections.OrderedDict",
                             "collections.Counter",
                             "torch.nn.parameter.Parameter",
                             "torch.serialization._get_layout",
                             "torch.Size",
                             "torch.Tensor",
                             "torch.device",
                             "_codecs.encode",
                             "builtins.bytearray",
                             "builtins.set",
                             "builtins.complex",
                             "torch._tensor._rebuild_from_type_v2",
                             "torch._utils._rebuild_parameter",
                             "torch._utils._rebuild_parameter_with_state",
                             "torch._utils._rebuild_qtensor",
                             "torch._utils._rebuild_tensor",
                             "torch._utils._rebuild_tensor_v2",
                             "torch._utils._rebuild_tensor_v3",
                             "torch._utils._rebuild_sparse_tensor",
                             "torch._utils._rebuild_meta_tensor_no_storage",
                             "torch._utils._rebuild_nested_tensor",
                             "torch._utils._rebuild_wrapper_subclass",
                             "torch._utils._rebuild_device_tensor_from_numpy",
                             "torch._utils._rebuild_device_tensor_from_cpu_tensor"}) {
      out.emplace(name, Allowed{GlobalRole::kCallable});
    }
    for (const char* scheme : {"per_tensor_affine", "per_tensor_symmetric", "per_channel_affine",
                               "per_channel_symmetric", "per_channel_affine_float_qparams"}) {
      out.emplace(fmt::format("torch.{}", scheme), Allowed{GlobalRole::kConstant});
    }
    add_dtypes(out);
    add_storage_and_tensor_classes(out);
    return out;
  }();
  return list;
}

const Value& tuple_args(const Value& args, const std::string& callee) {
  if (args.kind != ValueKind::kTuple) {
    pickle_corrupt(fmt::format("the arguments of {} are not a tuple", callee));
  }
  return args;
}

Value* make_object(const std::string& type_name, ValueArena& arena) {
  Value* out = arena.make(ValueKind::kObject);
  out->text = type_name;
  return out;
}

/// OrderedDict(), Counter(), OrderedDict(dict) and Counter(dict).
Value* new_dict(const std::string& name, const Value& args, ValueArena& arena) {
  Value* out = arena.make(ValueKind::kDict);
  if (args.items.size() == 1 && args.items[0]->kind == ValueKind::kDict) {
    arena.copy_items(*out, args.items[0]->items);
  } else if (!args.items.empty()) {
    pickle_unsupported(fmt::format("{} built from {} arguments", name, args.items.size()));
  }
  return out;
}

/// set() and set(list, tuple or set).
Value* new_set(const Value& args, ValueArena& arena) {
  Value* out = arena.make(ValueKind::kSet);
  if (args.items.size() == 1) {
    const auto kind = args.items[0]->kind;
    if (kind != ValueKind::kList && kind != ValueKind::kTuple && kind != ValueKind::kSet) {
      pickle_unsupported("set() of a value that is not a list, tuple or set");
    }
    arena.copy_items(*out, args.items[0]->items);
  } else if (!args.items.empty()) {
    pickle_corrupt(fmt::format("set() with {} arguments", args.items.size()));
  }
  return out;
}

/// torch.Size(tuple): a tuple (Python's torch.Size is a tuple subclass).
Value* new_size(const Value& args, ValueArena& arena) {
  Value* out = arena.make(ValueKind::kTuple);
  out->text = "torch.Size";
  if (args.items.size() == 1 &&
      (args.items[0]->kind == ValueKind::kTuple || args.items[0]->kind == ValueKind::kList)) {
    arena.copy_items(*out, args.items[0]->items);
  } else if (!args.items.empty()) {
    pickle_unsupported("torch.Size() of a value that is not a tuple or list");
  }
  return out;
}

}  // namespace

Value* resolve_global(const std::string& full_name, ValueArena& arena) {
  const auto found = allow_list().find(full_name);
  if (found == allow_list().end()) {
    return nullptr;
  }
  Value* out = arena.make(ValueKind::kGlobal);
  out->text = full_name;
  out->role = found->second.role;
  out->dtype = found->second.dtype;
  return out;
}

void reject_global(const std::string& full_name, std::string_view pickle) {
  if (pickle.find("ctorch.nn.modules.") != std::string_view::npos) {
    pickle_unsupported(fmt::format(
        "this is a whole pickled module (torch.save(model)), not weights: its pickle names "
        "'{}' and torch.nn.modules classes, which would run code to load. Save "
        "model.state_dict() instead, or convert the file with scripts/export_weights.py "
        "--unsafe-load (for a trusted file)",
        full_name));
  }
  pickle_unsupported(fmt::format(
      "global '{}' is not in the weights-only allow-list (torch/_weights_only_unpickler.py; "
      "torch.load(weights_only=True) refuses it too); nothing was imported or called",
      full_name));
}

namespace {

/// Whether `f`, which REDUCE or NEWOBJ applies, is a TorchScript class (what
/// it makes: an opaque object); `c10::Error` "corrupt pickle: <not_callable>"
/// unless it is that or an allow-listed callable.
bool is_script_class(const Value& f, const char* not_callable) {
  if (f.kind == ValueKind::kGlobal && f.role == GlobalRole::kScriptClass) return true;
  if (f.kind != ValueKind::kGlobal || f.role != GlobalRole::kCallable) pickle_corrupt(not_callable);
  return false;
}

}  // namespace

Value* apply_reduce(const Value& func, const Value& args, ValueArena& arena) {
  if (is_script_class(func, "REDUCE calls a value that is not an allow-listed function")) {
    return make_object(func.text, arena);
  }
  const std::string& name = func.text;
  tuple_args(args, name);
  if (is_tensor_rebuild(name)) {
    return rebuild_tensor(name, args, arena);
  }
  if (name == "collections.OrderedDict" || name == "collections.Counter") {
    return new_dict(name, args, arena);
  }
  if (name == "builtins.set") {
    return new_set(args, arena);
  }
  if (name == "torch.Size") {
    return new_size(args, arena);
  }
  if (name == "_codecs.encode") {
    return arena.make(ValueKind::kBytes);  // the content is never used
  }
  if (name == "builtins.bytearray" || name == "builtins.complex" || name == "torch.device" ||
      name == "torch.serialization._get_layout") {
    return make_object(name, arena);
  }
  pickle_unsupported(
      fmt::format("a call of {} (tensor kinds other than dense strided "
                  "tensors, or legacy constructors)",
                  name));
}

Value* apply_newobj(const Value& cls, const Value& args, ValueArena& arena) {
  if (is_script_class(cls, "NEWOBJ of a value that is not an allow-listed class")) {
    return make_object(cls.text, arena);
  }
  tuple_args(args, cls.text);
  if (cls.text == "torch.nn.parameter.Parameter") {
    if (args.items.empty()) {
      Value* out = arena.make(ValueKind::kTensor);
      out->tensor = torch::empty({0});
      return out;
    }
    if (args.items[0]->kind != ValueKind::kTensor) {
      pickle_corrupt("torch.nn.Parameter of a value that is not a tensor");
    }
    return args.items[0];
  }
  if (cls.text == "collections.OrderedDict" || cls.text == "collections.Counter") {
    return arena.make(ValueKind::kDict);
  }
  if (cls.text == "builtins.set") {
    return arena.make(ValueKind::kSet);
  }
  if (cls.text == "torch.Size") {
    return new_size(args, arena);
  }
  if (cls.text == "builtins.bytearray" || cls.text == "builtins.complex" ||
      cls.text == "torch.device") {
    return make_object(cls.text, arena);
  }
  pickle_unsupported(fmt::format("NEWOBJ of {}", cls.text));
}

void apply_build(const Value& instance, const Value& /*state*/) {
  if (instance.kind == ValueKind::kDict || instance.kind == ValueKind::kObject) {
    return;  // an OrderedDict's or Counter's __dict__, an object's attributes
  }
  if (instance.kind == ValueKind::kTensor) {
    pickle_unsupported("BUILD on a tensor (the legacy Tensor.set_ state)");
  }
  pickle_corrupt("BUILD on a value that is not a tensor, OrderedDict or allow-listed object");
}

}  // namespace detail
}  // namespace mha
