// read_hf_checkpoint: a Hugging Face model directory's config and weights, read
// with mha's own readers (read_state_dict), as transformers' from_pretrained
// looks for them (transformers/modeling_utils.py: model.safetensors, then
// model.safetensors.index.json, then pytorch_model.bin).

#include <c10/util/Exception.h>
#include <mha/hugging_face.h>
#include <mha/state_dict.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace mha {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kConfig = "config.json";
constexpr const char* kGenerationConfig = "generation_config.json";
constexpr const char* kSafetensors = "model.safetensors";
constexpr const char* kSafetensorsIndex = "model.safetensors.index.json";
constexpr const char* kPytorchBin = "pytorch_model.bin";

/// Adds every tensor of `file` (a name within `dir`) to `out`.
void add_file(HfCheckpoint& out, const std::string& file) {
  const std::string path = (fs::path(out.directory) / file).string();
  for (auto& [key, tensor] : read_state_dict(path)) {
    auto [it, inserted] = out.files.emplace(key, file);
    TORCH_CHECK(inserted, out.directory, ": tensor '", key, "' is in both ", it->second, " and ",
                file);
    out.tensors.emplace(key, std::move(tensor));
  }
  out.weight_files.push_back(file);
}

/// The shards of `model.safetensors.index.json` in order of first mention,
/// and the file each key is listed in.
void add_shards(HfCheckpoint& out) {
  const std::string path = (fs::path(out.directory) / kSafetensorsIndex).string();
  std::ifstream in(path, std::ios::binary);
  TORCH_CHECK(in, path, ": cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  json index;
  try {
    index = json::parse(text.str());
  } catch (const json::exception& e) {
    TORCH_CHECK(false, path, ": not valid JSON: ", e.what());
  }
  TORCH_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
              path, ": expected an object with a 'weight_map' object");
  std::vector<std::string> shards;
  std::set<std::string> seen;
  std::map<std::string, std::string> listed;
  for (const auto& [key, file] : index["weight_map"].items()) {
    TORCH_CHECK(file.is_string(), path, ": weight_map['", key, "'] is not a file name");
    const std::string name = file.get<std::string>();
    TORCH_CHECK(fs::path(name).filename().string() == name, path, ": weight_map['", key,
                "'] names '", name, "', not a file of the directory");
    listed[key] = name;
    if (seen.insert(name).second) {
      shards.push_back(name);
    }
  }
  for (const auto& shard : shards) {
    add_file(out, shard);
  }
  for (const auto& [key, file] : listed) {
    auto it = out.files.find(key);
    TORCH_CHECK(it != out.files.end(), out.directory, ": tensor '", key, "' is missing from ", file,
                " (", kSafetensorsIndex, " lists it there)");
  }
}

}  // namespace

bool is_hf_checkpoint(const std::string& directory) {
  std::error_code error;
  const fs::path dir(directory);
  if (!fs::is_directory(dir, error) || !fs::is_regular_file(dir / kConfig, error)) {
    return false;
  }
  if (!fs::is_regular_file(dir / kSafetensors, error) &&
      !fs::is_regular_file(dir / kSafetensorsIndex, error) &&
      !fs::is_regular_file(dir / kPytorchBin, error)) {
    return false;
  }
  try {
    return HfConfig::read((dir / kConfig).string()).has("model_type");
  } catch (const c10::Error&) {
    return false;
  }
}

HfCheckpoint read_hf_checkpoint(const std::string& directory) {
  const fs::path dir(directory);
  std::error_code error;
  TORCH_CHECK(fs::is_directory(dir, error), directory, ": not a directory");
  TORCH_CHECK(fs::is_regular_file(dir / kConfig, error), directory, ": no ", kConfig,
              " (a Hugging Face model directory has one)");
  HfCheckpoint out{directory, HfConfig::read((dir / kConfig).string()), std::nullopt, "", {}, {},
                   {}};
  out.model_type = out.config.string("model_type");
  if (fs::is_regular_file(dir / kGenerationConfig, error)) {
    out.generation_config = HfConfig::read((dir / kGenerationConfig).string());
  }
  if (fs::is_regular_file(dir / kSafetensors, error)) {
    add_file(out, kSafetensors);
  } else if (fs::is_regular_file(dir / kSafetensorsIndex, error)) {
    add_shards(out);
  } else if (fs::is_regular_file(dir / kPytorchBin, error)) {
    add_file(out, kPytorchBin);
  } else {
    TORCH_CHECK(false, directory, ": no weights: expected ", kSafetensors, ", ", kSafetensorsIndex,
                " or ", kPytorchBin);
  }
  return out;
}

}  // namespace mha
