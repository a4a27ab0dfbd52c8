// The tensor rebuild functions of the weights-only allow-list
// (torch/_utils.py: _rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3,
// _rebuild_parameter, _rebuild_parameter_with_state; torch/_tensor.py:
// _rebuild_from_type_v2) as views of the storages read from the archive, after
// checking that each view lies inside its storage's bytes.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "state_dict/pickle_globals.h"

namespace mha {
namespace detail {
namespace {

std::vector<int64_t> int_tuple(const Value& value, const char* what) {
  if (value.kind != ValueKind::kTuple && value.kind != ValueKind::kList) {
    pickle_corrupt(fmt::format("the tensor's {} is not a tuple", what));
  }
  std::vector<int64_t> out;
  out.reserve(value.items.size());
  for (const Value* item : value.items) {
    if (item->kind != ValueKind::kInt) {
      pickle_corrupt(fmt::format("the tensor's {} holds a value that is not an int64", what));
    }
    out.push_back(item->integer);
  }
  return out;
}

/// _rebuild_tensor(storage, offset, size, stride), with `dtype` for v3.
Value* view_of_storage(const Value& args, c10::ScalarType dtype, ValueArena& arena) {
  const Value& storage = *args.items[0];
  const Value& offset = *args.items[1];
  if (storage.kind != ValueKind::kStorage || offset.kind != ValueKind::kInt) {
    pickle_corrupt(
        "a tensor rebuilt from a value that is not a storage, or with an offset "
        "that is not an int");
  }
  if (dtype == c10::ScalarType::Undefined) {
    dtype = storage.dtype;
  }
  const auto sizes = int_tuple(*args.items[2], "size");
  const auto strides = int_tuple(*args.items[3], "stride");
  check_view(sizes, strides, offset.integer, static_cast<int64_t>(c10::elementSize(dtype)),
             storage.storage.nbytes());
  Value* out = arena.make(ValueKind::kTensor);
  // On the storage's device: the CPU, or the meta device when only the sizes
  // are read (torch_save_slices.cpp).
  out->tensor =
      torch::empty({0}, torch::TensorOptions().dtype(dtype).device(storage.storage.device()))
          .set_(storage.storage, offset.integer, sizes, strides);
  return out;
}

void expect_arity(const std::string& name, const Value& args, size_t low, size_t high) {
  if (args.items.size() < low || args.items.size() > high) {
    pickle_corrupt(fmt::format("{} called with {} arguments", name, args.items.size()));
  }
}

Value* tensor_argument(const std::string& name, const Value& args) {
  if (args.items.empty() || args.items[0]->kind != ValueKind::kTensor) {
    pickle_corrupt(fmt::format("{} called without a tensor", name));
  }
  return args.items[0];
}

}  // namespace

void check_view(const std::vector<int64_t>& sizes,
                const std::vector<int64_t>& strides,
                int64_t offset,
                int64_t item_size,
                size_t storage_bytes) {
  if (sizes.size() != strides.size()) {
    pickle_corrupt(
        fmt::format("the tensor has {} sizes but {} strides", sizes.size(), strides.size()));
  }
  if (offset < 0) {
    pickle_corrupt(fmt::format("the tensor has a negative storage offset {}", offset));
  }
  int64_t last = offset;  // highest element index reached
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || strides[d] < 0) {
      pickle_corrupt(fmt::format("the tensor has a negative size or stride (sizes {}, strides {})",
                                 sizes, strides));
    }
    if (sizes[d] == 0) {
      return;  // no element
    }
    int64_t reach = 0;
    if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &reach) ||
        __builtin_add_overflow(last, reach, &last)) {
      pickle_corrupt(fmt::format("the tensor's sizes {} and strides {} overflow", sizes, strides));
    }
  }
  int64_t end_byte = 0;
  if (__builtin_mul_overflow(last + 1, item_size, &end_byte) ||
      static_cast<uint64_t>(end_byte) > storage_bytes) {
    pickle_corrupt(
        fmt::format("the tensor (offset {}, sizes {}, strides {}) reaches past its "
                    "storage: the storage holds {} bytes, the view needs {}",
                    offset, sizes, strides, storage_bytes, static_cast<uint64_t>(end_byte)));
  }
}

bool is_tensor_rebuild(const std::string& name) {
  return name.rfind("torch._utils._rebuild_", 0) == 0 ||
         name == "torch._tensor._rebuild_from_type_v2";
}

Value* rebuild_tensor(const std::string& name, const Value& args, ValueArena& arena) {
  if (name == "torch._utils._rebuild_tensor" || name == "torch._utils._rebuild_tensor_v2") {
    expect_arity(name, args, name.back() == '2' ? 6 : 4, name.back() == '2' ? 7 : 4);
    return view_of_storage(args, c10::ScalarType::Undefined, arena);
  }
  if (name == "torch._utils._rebuild_tensor_v3") {
    expect_arity(name, args, 7, 8);
    const Value& dtype = *args.items[6];
    if (dtype.kind != ValueKind::kGlobal || dtype.role != GlobalRole::kDtype) {
      pickle_corrupt("_rebuild_tensor_v3 with a dtype argument that is not a dtype");
    }
    if (dtype.dtype == c10::ScalarType::Undefined) {
      pickle_unsupported(fmt::format("a tensor of dtype {}", dtype.text));
    }
    return view_of_storage(args, dtype.dtype, arena);
  }
  if (name == "torch._utils._rebuild_parameter" ||
      name == "torch._utils._rebuild_parameter_with_state") {
    expect_arity(name, args, name.back() == 'e' ? 4 : 3, name.back() == 'e' ? 4 : 3);
    return tensor_argument(name, args);
  }
  if (name == "torch._tensor._rebuild_from_type_v2") {
    expect_arity(name, args, 4, 4);
    const Value& func = *args.items[0];
    if (func.kind != ValueKind::kGlobal || !is_tensor_rebuild(func.text) || func.text == name ||
        args.items[2]->kind != ValueKind::kTuple) {
      pickle_corrupt("_rebuild_from_type_v2 of a value that is not a tensor rebuild function");
    }
    Value* out = rebuild_tensor(func.text, *args.items[2], arena);
    if (out->kind != ValueKind::kTensor) {
      pickle_corrupt("_rebuild_from_type_v2 did not give a tensor");
    }
    return out;
  }
  pickle_unsupported(
      fmt::format("a tensor rebuilt by {} (only dense strided tensors are read: "
                  "no sparse, quantized, nested, meta or subclass tensors)",
                  name));
}

}  // namespace detail
}  // namespace mha
