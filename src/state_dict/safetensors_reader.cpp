// Reads `.safetensors` files (https://github.com/huggingface/safetensors):
// an 8-byte little-endian header size N, N bytes of JSON header
// {"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [begin, end]}},
// then the tensor bytes, offsets relative to the end of the header. Every
// number in the header is checked against the file before a byte is copied,
// with the rules of the reference implementation: offsets within the data,
// sizes equal to shape x dtype size, ranges contiguous without overlaps or
// gaps and covering the whole data.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <vector>

#include "state_dict/errors.h"
#include "state_dict/file_io.h"
#include "state_dict/formats.h"
#include "state_dict/safetensors_dtype.h"
#include "state_dict/safetensors_index.h"

namespace mha {
namespace detail {
namespace {

using nlohmann::json;

/// Header size limit of the reference implementation (100 MB).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
/// A valid header nests 3 levels (root, tensor info, shape/offsets).
constexpr int kMaxHeaderDepth = 4;

/// Parses the header, rejecting duplicate keys (which nlohmann would silently
/// overwrite) and nesting deeper than a valid header has.
json parse_header(const std::string& path, const char* begin, const char* end) {
  std::vector<std::set<std::string>> keys_by_object;
  std::string duplicate;
  bool too_deep = false;
  const json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxHeaderDepth) {
      too_deep = true;
      throw std::runtime_error("too deep");
    }
    if (event == json::parse_event_t::object_start) {
      keys_by_object.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      keys_by_object.pop_back();
    } else if (event == json::parse_event_t::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!keys_by_object.empty() && !keys_by_object.back().insert(key).second) {
        duplicate = key;
        throw std::runtime_error("duplicate key");
      }
    }
    return true;
  };
  try {
    return json::parse(begin, end, callback);
  } catch (const std::exception& e) {
    if (too_deep) {
      fail_file(path, fmt::format("invalid safetensors header: nested deeper than {} levels",
                                  kMaxHeaderDepth));
    }
    if (!duplicate.empty()) {
      fail_file(path, fmt::format("invalid safetensors header: duplicate key '{}'", duplicate));
    }
    fail_file(path, fmt::format("invalid safetensors header: {}", e.what()));
  }
}

/// A non-negative integer of the header, or an error naming tensor `name`'s `what`.
uint64_t header_uint(const std::string& path,
                     const json& value,
                     const std::string& name,
                     const char* what) {
  if (!value.is_number_unsigned()) {
    fail_file(path, fmt::format("invalid safetensors header: tensor '{}' {} is {}, expected a "
                                "non-negative integer",
                                name, what, value.dump()));
  }
  return value.get<uint64_t>();
}

/// The entry's dtype, checked.
c10::ScalarType entry_dtype(const std::string& path, const std::string& name, const json& info) {
  const auto& dtype_json = info.at("dtype");
  if (!dtype_json.is_string()) {
    fail_file(path, fmt::format("invalid safetensors header: tensor '{}' has dtype {}, expected "
                                "a string",
                                name, dtype_json.dump()));
  }
  const auto dtype = safetensors_to_dtype(dtype_json.get_ref<const std::string&>());
  if (!dtype) {
    fail_file(path, fmt::format("tensor '{}' has unknown dtype '{}'", name,
                                dtype_json.get_ref<const std::string&>()));
  }
  return *dtype;
}

/// The entry's shape, checked; `bytes` becomes the size of its data.
std::vector<int64_t> entry_shape(const std::string& path,
                                 const std::string& name,
                                 const json& info,
                                 uint64_t& bytes) {
  const auto& shape_json = info.at("shape");
  if (!shape_json.is_array()) {
    fail_file(path, fmt::format("invalid safetensors header: tensor '{}' has shape {}, expected "
                                "an array",
                                name, shape_json.dump()));
  }
  std::vector<int64_t> shape;
  for (const auto& dim_json : shape_json) {
    const uint64_t dim = header_uint(path, dim_json, name, "shape entry");
    if (dim > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(bytes, dim, &bytes) ||
        bytes > static_cast<uint64_t>(INT64_MAX)) {
      fail_file(path, fmt::format("tensor '{}': shape {} is too large", name, shape_json.dump()));
    }
    shape.push_back(static_cast<int64_t>(dim));
  }
  return shape;
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const json& info) {
  if (!info.is_object()) {
    fail_file(path, fmt::format("invalid safetensors header: tensor '{}' is {}, expected an "
                                "object",
                                name, info.type_name()));
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!info.contains(field)) {
      fail_file(path,
                fmt::format("invalid safetensors header: tensor '{}' has no '{}'", name, field));
    }
  }
  SafetensorsEntry entry{name, entry_dtype(path, name, info), {}, 0, 0};
  uint64_t bytes = c10::elementSize(entry.dtype);
  entry.shape = entry_shape(path, name, info, bytes);
  const auto& offsets = info.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2) {
    fail_file(path, fmt::format("invalid safetensors header: tensor '{}' has data_offsets {}, "
                                "expected [begin, end]",
                                name, offsets.dump()));
  }
  entry.begin = header_uint(path, offsets[0], name, "data_offsets begin");
  entry.end = header_uint(path, offsets[1], name, "data_offsets end");
  if (entry.end < entry.begin) {
    fail_file(path, fmt::format("tensor '{}': data_offsets [{}, {}] end before they begin", name,
                                entry.begin, entry.end));
  }
  if (entry.end - entry.begin != bytes) {
    fail_file(path, fmt::format("tensor '{}': data_offsets [{}, {}] hold {} bytes, but shape {} "
                                "of dtype {} needs {}",
                                name, entry.begin, entry.end, entry.end - entry.begin,
                                info.at("shape").dump(),
                                info.at("dtype").get_ref<const std::string&>(), bytes));
  }
  return entry;
}

/// The JSON header (an object) and, in `header_bytes`, its size field, checked
/// against the file.
json read_header(InputFile& file, uint64_t& header_bytes) {
  const auto& path = file.path();
  if (file.size() < 8) {
    fail_file(path, fmt::format("truncated safetensors file: {} bytes, the header size alone "
                                "takes 8",
                                file.size()));
  }
  file.read_at(0, &header_bytes, 8);  // little-endian hosts only
  if (header_bytes > kMaxHeaderBytes) {
    fail_file(path, fmt::format("safetensors header size {} exceeds the {} byte limit",
                                header_bytes, kMaxHeaderBytes));
  }
  if (header_bytes > file.size() - 8) {
    fail_file(path, fmt::format("truncated safetensors file: header of {} bytes ends past the "
                                "end of the file ({} bytes)",
                                header_bytes, file.size()));
  }
  std::string header_text(header_bytes, '\0');
  file.read_at(8, header_text.data(), header_text.size());
  if (header_text.empty() || header_text[0] != '{') {
    fail_file(path, "invalid safetensors header: it does not start with '{'");
  }
  json header = parse_header(path, header_text.data(), header_text.data() + header_bytes);
  if (!header.is_object()) {
    fail_file(path, fmt::format("invalid safetensors header: the header is {}, expected an object",
                                header.type_name()));
  }
  return header;
}

void check_metadata(const std::string& path, const json& metadata) {
  if (!metadata.is_object()) {
    fail_file(path, "invalid safetensors header: __metadata__ is not an object");
  }
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string()) {
      fail_file(path, fmt::format("invalid safetensors header: __metadata__ entry '{}' is {}, "
                                  "expected a string",
                                  key, value.dump()));
    }
  }
}

/// The header's tensor entries, each inside the `data_bytes` after the header.
std::vector<SafetensorsEntry> parse_entries(const std::string& path,
                                            const json& header,
                                            uint64_t data_bytes) {
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      check_metadata(path, info);
      continue;
    }
    entries.push_back(parse_entry(path, name, info));
    const auto& entry = entries.back();
    if (entry.end > data_bytes) {
      fail_file(path, fmt::format("tensor '{}': data_offsets [{}, {}] reach past the end of the "
                                  "data ({} bytes after the header)",
                                  name, entry.begin, entry.end, data_bytes));
    }
  }
  return entries;
}

/// The ranges, in file order, must tile the data exactly.
void check_coverage(const std::string& path,
                    const std::vector<SafetensorsEntry>& entries,
                    uint64_t data_bytes) {
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& entry : entries) {
    by_offset.push_back(&entry);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
              return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
            });
  uint64_t expected_begin = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry* entry : by_offset) {
    if (entry->begin < expected_begin) {
      fail_file(path,
                fmt::format("tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", previous->name,
                            previous->begin, previous->end, entry->name, entry->begin, entry->end));
    }
    if (entry->begin > expected_begin) {
      fail_file(path, fmt::format("tensor '{}' starts at {}, leaving bytes [{}, {}) unused",
                                  entry->name, entry->begin, expected_begin, entry->begin));
    }
    expected_begin = entry->end;
    previous = entry;
  }
  if (expected_begin != data_bytes) {
    fail_file(path, fmt::format("{} bytes after the last tensor's data (data holds {} bytes, "
                                "tensors use {})",
                                data_bytes - expected_begin, data_bytes, expected_begin));
  }
}

}  // namespace

SafetensorsIndex read_safetensors_index(InputFile& file) {
  uint64_t header_bytes = 0;
  const json header = read_header(file, header_bytes);
  SafetensorsIndex index;
  index.data_start = 8 + header_bytes;
  const uint64_t data_bytes = file.size() - index.data_start;
  index.entries = parse_entries(file.path(), header, data_bytes);
  check_coverage(file.path(), index.entries, data_bytes);
  return index;
}

void check_bool_bytes(const std::string& path,
                      const std::string& name,
                      const void* data,
                      size_t bytes) {
  const auto* begin = static_cast<const uint8_t*>(data);
  const auto* bad = std::find_if(begin, begin + bytes, [](uint8_t byte) { return byte > 1; });
  if (bad != begin + bytes) {
    fail_file(path, fmt::format("tensor '{}' of dtype BOOL holds byte {} at index {}", name, *bad,
                                bad - begin));
  }
}

TensorMap read_safetensors(const std::string& path) {
  InputFile file(path);
  const SafetensorsIndex index = read_safetensors_index(file);
  TensorMap out;
  for (const auto& entry : index.entries) {  // each tensor's bytes straight into it
    auto tensor = torch::empty(entry.shape, torch::TensorOptions().dtype(entry.dtype));
    file.read_at(index.data_start + entry.begin, tensor.data_ptr(), entry.end - entry.begin);
    if (entry.dtype == c10::kBool) {
      check_bool_bytes(path, entry.name, tensor.data_ptr(), entry.end - entry.begin);
    }
    out.emplace(entry.name, std::move(tensor));
  }
  return out;
}

}  // namespace detail
}  // namespace mha
