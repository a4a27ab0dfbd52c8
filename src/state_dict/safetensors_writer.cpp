// Writes `.safetensors` files: the tensors' bytes contiguously in the given
// order, after a JSON header padded with spaces to a multiple of 8 bytes (as
// the reference implementation does, so that the data is aligned).

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>

#include "state_dict/errors.h"
#include "state_dict/file_io.h"
#include "state_dict/formats.h"
#include "state_dict/safetensors_dtype.h"

namespace mha {
namespace detail {

void write_safetensors(const NamedTensors& tensors, const std::string& path) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::vector<torch::Tensor> contiguous;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == "__metadata__" || header.contains(name)) {
      fail_file(path,
                fmt::format("cannot write tensor '{}': the name is reserved or repeated", name));
    }
    const auto dtype = dtype_to_safetensors(tensor.scalar_type());
    if (!dtype) {
      fail_file(path, fmt::format("cannot write tensor '{}': dtype {} has no safetensors "
                                  "equivalent",
                                  name, c10::toString(tensor.scalar_type())));
    }
    auto cpu = tensor.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = cpu.nbytes();
    header[name] = {{"dtype", *dtype},
                    {"shape", cpu.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contiguous.push_back(std::move(cpu));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_bytes = text.size();
  char size_field[8];
  std::memcpy(size_field, &header_bytes, 8);  // little-endian hosts only

  std::vector<std::string_view> parts{std::string_view(size_field, 8), text};
  for (const auto& tensor : contiguous) {
    parts.emplace_back(static_cast<const char*>(tensor.const_data_ptr()), tensor.nbytes());
  }
  write_file_bytes(path, parts);
}

}  // namespace detail
}  // namespace mha
