#include "linear/weight_form.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

/// The suffixes of the children that hold converted weights.
constexpr const char* kFormSuffixes[] = {"_int8", "_packed"};

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() > suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Tensor multiply_row_blocks(const std::vector<int64_t>& block_rows,
                           int64_t begin,
                           int64_t rows,
                           const std::function<Tensor(int64_t)>& multiply_block) {
  std::vector<Tensor> parts;  // the blocks overlapping the rows: (M, rows of block)
  int64_t first = -1;         // the first of them's first row
  for (int64_t block = 0, offset = 0; block < static_cast<int64_t>(block_rows.size()); ++block) {
    const int64_t end = offset + block_rows[block];
    if (offset < begin + rows && begin < end) {
      parts.push_back(multiply_block(block));
      if (first < 0) first = offset;
    }
    offset = end;
  }
  Tensor out = parts.size() == 1 ? parts[0] : at::cat(parts, /*dim=*/1);  // (M, blocks' rows)
  if (begin != first || out.size(1) != rows) {
    out = out.narrow(1, begin - first, rows).contiguous();  // (M, rows)
  }
  return out;
}

std::optional<std::string> converted_param(const std::string& child) {
  for (const char* suffix : kFormSuffixes) {
    if (ends_with(child, suffix)) return child.substr(0, child.size() - std::string(suffix).size());
  }
  return std::nullopt;
}

std::shared_ptr<const WeightForm> weight_form(const torch::nn::Module& owner,
                                              const std::string& param) {
  for (const auto& child : owner.named_children()) {
    if (converted_param(child.key()) == param) {
      return std::dynamic_pointer_cast<const WeightForm>(child.value());
    }
  }
  return nullptr;
}

void reject_conversion(const char* kind,
                       std::optional<torch::Device> device,
                       std::optional<torch::Dtype> dtype) {
  const bool same = (!device || device->is_cpu()) && (!dtype || *dtype == at::kFloat);
  TORCH_CHECK(same, "to(", device ? device->str() : std::string(), device && dtype ? ", " : "",
              dtype ? c10::toString(*dtype) : "", "): this module holds ", kind,
              " weights, which compute in float32 on the CPU only; to run in another dtype or on "
              "another device, call mha::unpack(module) first (prepacked weights), or build a "
              "float module and load the float weights (int8)");
}

Tensor float_weight(const torch::nn::Module& owner, const std::string& param, const Tensor& value) {
  const auto form = is_placeholder(value) ? weight_form(owner, param) : nullptr;
  const auto values = form ? form->float_weight() : std::nullopt;
  return values ? *values : value;
}

}  // namespace detail
}  // namespace mha
