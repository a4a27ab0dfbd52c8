// mha::read_rope_parameters: transformers 5.23's modeling_rope_utils.py
// (`RotaryEmbeddingConfigMixin.convert_rope_params_to_dict`,
// `standardize_rope_params`) on a config.json.

#include <c10/util/Exception.h>
#include <mha/hugging_face.h>

#include <nlohmann/json.hpp>
#include <string>

namespace mha {

namespace {

using nlohmann::json;

/// `dict[key]` as `T` where present and not null.
template <typename T>
std::optional<T> field(const json& dict, const char* key) {
  const auto found = dict.find(key);
  if (found == dict.end() || found->is_null()) return std::nullopt;
  return found->get<T>();
}

/// The parameters of a standardized `rope_parameters` dict.
RopeParameters parameters_of(const json& dict) {
  RopeParameters rope;
  rope.rope_type(dict.at("rope_type").get<std::string>());
  rope.rope_theta(dict.at("rope_theta").get<double>());
  rope.partial_rotary_factor(field<double>(dict, "partial_rotary_factor").value_or(1.0));
  rope.factor(field<double>(dict, "factor"));
  rope.original_max_position_embeddings(field<int64_t>(dict, "original_max_position_embeddings"));
  rope.attention_factor(field<double>(dict, "attention_factor"));
  rope.beta_fast(field<double>(dict, "beta_fast"));
  rope.beta_slow(field<double>(dict, "beta_slow"));
  rope.mscale(field<double>(dict, "mscale"));
  rope.mscale_all_dim(field<double>(dict, "mscale_all_dim"));
  rope.truncate(field<bool>(dict, "truncate").value_or(true));
  rope.long_factor(field<std::vector<double>>(dict, "long_factor").value_or(std::vector<double>{}));
  rope.short_factor(
      field<std::vector<double>>(dict, "short_factor").value_or(std::vector<double>{}));
  rope.low_freq_factor(field<double>(dict, "low_freq_factor"));
  rope.high_freq_factor(field<double>(dict, "high_freq_factor"));
  return rope;
}

}  // namespace

RopeParameters read_rope_parameters(const HfConfig& config, double default_theta) {
  json dict = json::parse(config.json_text("rope_scaling"));
  if (dict.is_null() || dict.empty()) dict = json::parse(config.json_text("rope_parameters"));
  if (dict.is_null()) dict = json::object();
  TORCH_CHECK_VALUE(dict.is_object(), config.source(),
                    ": expected rope_parameters (or rope_scaling) to be an object, but got ",
                    dict.dump());
  RopeParameters rope;
  try {
    if (!dict.contains("rope_theta")) {
      dict["rope_theta"] = config.number("rope_theta", default_theta);
    }
    if (!dict.contains("partial_rotary_factor") && config.has("partial_rotary_factor")) {
      dict["partial_rotary_factor"] = config.number("partial_rotary_factor");
    }
    if (!dict.contains("rope_type")) dict["rope_type"] = dict.value("type", "default");
    const std::string type = dict.at("rope_type").get<std::string>();
    if (type == "llama3" || type == "yarn" || type == "longrope") {
      if (config.has("original_max_position_embeddings")) {
        dict["original_max_position_embeddings"] =
            config.integer("original_max_position_embeddings");
      } else if (!dict.contains("original_max_position_embeddings")) {
        dict["original_max_position_embeddings"] = config.integer("max_position_embeddings");
      }
    }
    rope = parameters_of(dict);
  } catch (const json::exception& e) {
    TORCH_CHECK_VALUE(false, config.source(), ": rope_parameters ", dict.dump(),
                      " is malformed: ", e.what());
  }
  return rope;
}

}  // namespace mha
