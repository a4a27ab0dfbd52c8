// HfConfig: the top-level fields of a config.json, kept as JSON text and read
// on demand, so that nlohmann_json stays out of the public header.

#include <c10/util/Exception.h>
#include <mha/hugging_face.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace mha {
namespace {

using nlohmann::json;

std::string type_name(const json& value) { return value.type_name(); }

}  // namespace

HfConfig HfConfig::parse(const std::string& json_text, const std::string& source) {
  json parsed;
  try {
    parsed = json::parse(json_text);
  } catch (const json::exception& e) {
    TORCH_CHECK(false, source, ": not valid JSON: ", e.what());
  }
  TORCH_CHECK(parsed.is_object(), source, ": expected a JSON object, but got ", type_name(parsed));
  HfConfig config;
  config.source_ = source;
  for (const auto& [field, value] : parsed.items()) {
    config.fields_[field] = value.dump();
  }
  return config;
}

HfConfig HfConfig::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TORCH_CHECK(in, path, ": cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

std::string HfConfig::json_text(const std::string& field) const {
  auto it = fields_.find(field);
  return it != fields_.end() ? it->second : "null";
}

bool HfConfig::has(const std::string& field) const {
  auto it = fields_.find(field);
  return it != fields_.end() && it->second != "null";
}

namespace {

json field_value(const std::map<std::string, std::string>& fields,
                 const std::string& source,
                 const std::string& field) {
  auto it = fields.find(field);
  TORCH_CHECK(it != fields.end() && it->second != "null", source, ": field '", field,
              "' is missing");
  return json::parse(it->second);
}

}  // namespace

int64_t HfConfig::integer(const std::string& field) const {
  json value = field_value(fields_, source_, field);
  TORCH_CHECK(value.is_number_integer(), source_, ": expected field '", field,
              "' to be an integer, but got ", value.dump());
  return value.get<int64_t>();
}

int64_t HfConfig::integer(const std::string& field, int64_t fallback) const {
  return has(field) ? integer(field) : fallback;
}

double HfConfig::number(const std::string& field) const {
  json value = field_value(fields_, source_, field);
  TORCH_CHECK(value.is_number(), source_, ": expected field '", field, "' to be a number, but got ",
              value.dump());
  return value.get<double>();
}

double HfConfig::number(const std::string& field, double fallback) const {
  return has(field) ? number(field) : fallback;
}

std::string HfConfig::string(const std::string& field) const {
  json value = field_value(fields_, source_, field);
  TORCH_CHECK(value.is_string(), source_, ": expected field '", field, "' to be a string, but got ",
              value.dump());
  return value.get<std::string>();
}

std::string HfConfig::string(const std::string& field, const std::string& fallback) const {
  return has(field) ? string(field) : fallback;
}

bool HfConfig::boolean(const std::string& field, bool fallback) const {
  if (!has(field)) {
    return fallback;
  }
  json value = field_value(fields_, source_, field);
  TORCH_CHECK(value.is_boolean(), source_, ": expected field '", field,
              "' to be true or false, but got ", value.dump());
  return value.get<bool>();
}

std::vector<int64_t> HfConfig::integers(const std::string& field) const {
  if (!has(field)) {
    return {};
  }
  json value = field_value(fields_, source_, field);
  if (value.is_number_integer()) {
    return {value.get<int64_t>()};
  }
  TORCH_CHECK(value.is_array(), source_, ": expected field '", field,
              "' to be an integer or a list of integers, but got ", value.dump());
  std::vector<int64_t> out;
  for (const auto& item : value) {
    TORCH_CHECK(item.is_number_integer(), source_, ": expected field '", field,
                "' to be an integer or a list of integers, but got ", value.dump());
    out.push_back(item.get<int64_t>());
  }
  return out;
}

std::vector<std::string> HfConfig::strings(const std::string& field) const {
  if (!has(field)) {
    return {};
  }
  json value = field_value(fields_, source_, field);
  if (value.is_string()) {
    return {value.get<std::string>()};
  }
  const bool strings = value.is_array() && std::all_of(value.begin(), value.end(),
                                                       [](const json& v) { return v.is_string(); });
  TORCH_CHECK(strings, source_, ": expected field '", field,
              "' to be a string or a list of strings, but got ", value.dump());
  return value.get<std::vector<std::string>>();
}

std::vector<std::vector<int64_t>> HfConfig::integer_lists(const std::string& field) const {
  if (!has(field)) {
    return {};
  }
  json value = field_value(fields_, source_, field);
  std::vector<std::vector<int64_t>> out;
  auto fail = [&] {
    TORCH_CHECK(false, source_, ": expected field '", field,
                "' to be a list of lists of integers, but got ", value.dump());
  };
  if (!value.is_array()) {
    fail();
  }
  for (const auto& list : value) {
    if (!list.is_array()) {
      fail();
    }
    out.emplace_back();
    for (const auto& item : list) {
      if (!item.is_number_integer()) {
        fail();
      }
      out.back().push_back(item.get<int64_t>());
    }
  }
  return out;
}

}  // namespace mha
