#include "state_dict/safetensors_dtype.h"

#include <array>
#include <utility>

namespace mha {
namespace detail {
namespace {

// https://github.com/huggingface/safetensors (safetensors/src/tensor.rs, Dtype)
// and safetensors/torch.py (_TYPES): exactly these pairs.
constexpr std::array<std::pair<const char*, c10::ScalarType>, 18> kDtypes{{
    {"BOOL", c10::kBool},
    {"U8", c10::kByte},
    {"I8", c10::kChar},
    {"U16", c10::kUInt16},
    {"I16", c10::kShort},
    {"U32", c10::kUInt32},
    {"I32", c10::kInt},
    {"U64", c10::kUInt64},
    {"I64", c10::kLong},
    {"F16", c10::kHalf},
    {"BF16", c10::kBFloat16},
    {"F32", c10::kFloat},
    {"F64", c10::kDouble},
    {"C64", c10::kComplexFloat},
    {"F8_E4M3", c10::kFloat8_e4m3fn},
    {"F8_E5M2", c10::kFloat8_e5m2},
    {"F8_E4M3FNUZ", c10::kFloat8_e4m3fnuz},
    {"F8_E5M2FNUZ", c10::kFloat8_e5m2fnuz},
}};

}  // namespace

std::optional<c10::ScalarType> safetensors_to_dtype(const std::string& name) {
  for (const auto& [key, dtype] : kDtypes) {
    if (name == key) {
      return dtype;
    }
  }
  return std::nullopt;
}

std::optional<std::string> dtype_to_safetensors(c10::ScalarType dtype) {
  for (const auto& [key, value] : kDtypes) {
    if (dtype == value) {
      return std::string(key);
    }
  }
  return std::nullopt;
}

}  // namespace detail
}  // namespace mha
