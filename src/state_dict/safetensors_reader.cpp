// Reads `.safetensors` files (https://github.com/huggingface/safetensors):
// an 8-byte little-endian header size N, N bytes of JSON header
// {"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [begin, end]}},
// then the tensor bytes, offsets relative to the end of the header. Every
// number in the header is checked against the file before a byte is copied,
// with the rules of the reference implementation: offsets within the data,
// sizes equal to shape x dtype size, ranges contiguous without overlaps or
// gaps and covering the whole data.

#include "state_dict/errors.h"
#include "state_dict/file_io.h"
#include "state_dict/formats.h"
#include "state_dict/safetensors_dtype.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <tuple>
#include <vector>

namespace mha {
namespace detail {
namespace {

using nlohmann::json;

/// Header size limit of the reference implementation (100 MB).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
/// A valid header nests 3 levels (root, tensor info, shape/offsets).
constexpr int kMaxHeaderDepth = 4;

struct TensorEntry {
  std::string name;
  c10::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

/// Parses the header, rejecting duplicate keys (which nlohmann would silently
/// overwrite) and nesting deeper than a valid header has.
json parse_header(const std::string& path, const char* begin, const char* end) {
  std::vector<std::set<std::string>> keys_by_object;
  std::string duplicate;
  bool too_deep = false;
  const json::parser_callback_t callback = [&](int depth, json::parse_event_t event,
                                               json& parsed) {
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

/// A non-negative integer of the header, or an error naming `what`.
uint64_t header_uint(const std::string& path, const json& value, const std::string& what) {
  if (!value.is_number_unsigned()) {
    fail_file(path, fmt::format("invalid safetensors header: {} is {}, expected a non-negative "
                                "integer",
                                what, value.dump()));
  }
  return value.get<uint64_t>();
}

TensorEntry parse_entry(const std::string& path, const std::string& name, const json& info) {
  const auto where = fmt::format("tensor '{}'", name);
  if (!info.is_object()) {
    fail_file(path, fmt::format("invalid safetensors header: {} is {}, expected an object", where,
                                info.type_name()));
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!info.contains(field)) {
      fail_file(path, fmt::format("invalid safetensors header: {} has no '{}'", where, field));
    }
  }
  const auto& dtype_json = info.at("dtype");
  if (!dtype_json.is_string()) {
    fail_file(path, fmt::format("invalid safetensors header: {} has dtype {}, expected a string",
                                where, dtype_json.dump()));
  }
  const auto dtype_name = dtype_json.get<std::string>();
  const auto dtype = safetensors_to_dtype(dtype_name);
  if (!dtype) {
    fail_file(path, fmt::format("{} has unknown dtype '{}'", where, dtype_name));
  }
  const auto& shape_json = info.at("shape");
  if (!shape_json.is_array()) {
    fail_file(path, fmt::format("invalid safetensors header: {} has shape {}, expected an array",
                                where, shape_json.dump()));
  }
  TensorEntry entry{name, *dtype, {}, 0, 0};
  uint64_t bytes = c10::elementSize(*dtype);
  for (const auto& dim_json : shape_json) {
    const uint64_t dim = header_uint(path, dim_json, where + " shape entry");
    if (dim > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(bytes, dim, &bytes) ||
        bytes > static_cast<uint64_t>(INT64_MAX)) {
      fail_file(path, fmt::format("{}: shape {} is too large", where, shape_json.dump()));
    }
    entry.shape.push_back(static_cast<int64_t>(dim));
  }
  const auto& offsets = info.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2) {
    fail_file(path, fmt::format("invalid safetensors header: {} has data_offsets {}, expected "
                                "[begin, end]",
                                where, offsets.dump()));
  }
  entry.begin = header_uint(path, offsets[0], where + " data_offsets begin");
  entry.end = header_uint(path, offsets[1], where + " data_offsets end");
  if (entry.end < entry.begin) {
    fail_file(path, fmt::format("{}: data_offsets [{}, {}] end before they begin", where,
                                entry.begin, entry.end));
  }
  if (entry.end - entry.begin != bytes) {
    fail_file(path, fmt::format("{}: data_offsets [{}, {}] hold {} bytes, but shape {} of dtype "
                                "{} needs {}",
                                where, entry.begin, entry.end, entry.end - entry.begin,
                                shape_json.dump(), dtype_name, bytes));
  }
  return entry;
}

}  // namespace

TensorMap read_safetensors(const std::string& path) {
  InputFile file(path);
  if (file.size() < 8) {
    fail_file(path, fmt::format("truncated safetensors file: {} bytes, the header size alone "
                                "takes 8",
                                file.size()));
  }
  uint64_t header_bytes = 0;
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
  const char* header_begin = header_text.data();
  const json header = parse_header(path, header_begin, header_begin + header_bytes);
  if (!header.is_object()) {
    fail_file(path, fmt::format("invalid safetensors header: the header is {}, expected an object",
                                header.type_name()));
  }

  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_bytes = file.size() - data_start;
  std::vector<TensorEntry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) {
        fail_file(path, "invalid safetensors header: __metadata__ is not an object");
      }
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string()) {
          fail_file(path, fmt::format("invalid safetensors header: __metadata__ entry '{}' is {}, "
                                      "expected a string",
                                      key, value.dump()));
        }
      }
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

  // The ranges, in file order, must tile the data exactly.
  std::vector<const TensorEntry*> by_offset;
  for (const auto& entry : entries) {
    by_offset.push_back(&entry);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  uint64_t expected_begin = 0;
  const TensorEntry* previous = nullptr;
  for (const TensorEntry* entry : by_offset) {
    if (entry->begin < expected_begin) {
      fail_file(path, fmt::format("tensors '{}' [{}, {}] and '{}' [{}, {}] overlap",
                                  previous->name, previous->begin, previous->end, entry->name,
                                  entry->begin, entry->end));
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

  // Everything checked: read each tensor's bytes straight into it.
  TensorMap out;
  for (const auto& entry : entries) {
    auto tensor = torch::empty(entry.shape, torch::TensorOptions().dtype(entry.dtype));
    const size_t bytes = entry.end - entry.begin;
    file.read_at(data_start + entry.begin, tensor.data_ptr(), bytes);
    if (entry.dtype == c10::kBool) {
      const auto* data = static_cast<const uint8_t*>(tensor.data_ptr());
      for (size_t i = 0; i < bytes; ++i) {
        if (data[i] > 1) {
          fail_file(path, fmt::format("tensor '{}' of dtype BOOL holds byte {} at index {}",
                                      entry.name, data[i], i));
        }
      }
    }
    out.emplace(entry.name, std::move(tensor));
  }
  return out;
}

}  // namespace detail
}  // namespace mha
