// A sentence-transformers directory read as sentence-transformers 6.3 reads
// it (SentenceTransformer._load_modules, Pooling.load_config with its legacy
// keys, Dense.load, Transformer's sentence_bert_config.json).

#include "pipelines/sentence_modules.h"

#include <c10/util/Exception.h>
#include <mha/state_dict.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

namespace mha {
namespace detail {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& path) {
  std::ifstream in(path);
  TORCH_CHECK(in.good(), path.string(), ": cannot read the file");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    TORCH_CHECK(false, path.string(), ": not JSON (", e.what(), ")");
  }
  return json();
}

/// The modes' names, as sentence-transformers spells them.
const std::map<std::string, SentencePooling>& pooling_modes() {
  static const std::map<std::string, SentencePooling> modes = {
      {"cls", SentencePooling::kCls},
      {"max", SentencePooling::kMax},
      {"mean", SentencePooling::kMean},
      {"mean_sqrt_len_tokens", SentencePooling::kMeanSqrtLenTokens},
      {"weightedmean", SentencePooling::kWeightedMean},
      {"lasttoken", SentencePooling::kLastToken}};
  return modes;
}

SentencePooling pooling_mode(const std::string& name, const fs::path& file) {
  const auto found = pooling_modes().find(name);
  if (found != pooling_modes().end()) return found->second;
  std::string supported;
  for (const auto& entry : pooling_modes())
    supported += (supported.empty() ? "" : ", ") + entry.first;
  TORCH_CHECK(false, file.string(), ": pooling mode '", name,
              "' is not supported; supported: ", supported);
  return SentencePooling::kMean;
}

/// Pooling's config: `pooling_mode` (a name or a list), or the published
/// `pooling_mode_*` booleans (none set: mean).
std::vector<SentencePooling> read_pooling(const fs::path& dir) {
  const fs::path file = dir / "config.json";
  const json config = read_json(file);
  std::vector<SentencePooling> modes;
  if (config.contains("pooling_mode")) {
    const json& mode = config.at("pooling_mode");
    for (const json& name : mode.is_array() ? mode : json::array({mode})) {
      modes.push_back(pooling_mode(name.get<std::string>(), file));
    }
    return modes;
  }
  static const std::vector<std::pair<const char*, const char*>> legacy = {
      {"pooling_mode_cls_token", "cls"},
      {"pooling_mode_max_tokens", "max"},
      {"pooling_mode_mean_tokens", "mean"},
      {"pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len_tokens"},
      {"pooling_mode_weightedmean_tokens", "weightedmean"},
      {"pooling_mode_lasttoken", "lasttoken"}};
  for (const auto& [key, name] : legacy) {
    if (config.value(key, false)) modes.push_back(pooling_mode(name, file));
  }
  if (modes.empty()) modes.push_back(SentencePooling::kMean);
  return modes;
}

/// A Dense module: its config and `linear.weight`, `linear.bias`.
DenseModule read_dense(const fs::path& dir) {
  const fs::path file = dir / "config.json";
  const json config = read_json(file);
  const std::string activation =
      config.value("activation_function", "torch.nn.modules.activation.Tanh");
  TORCH_CHECK(activation == "torch.nn.modules.activation.Tanh" ||
                  activation == "torch.nn.modules.linear.Identity",
              file.string(), ": activation_function '", activation,
              "' is not supported; supported: torch.nn.modules.activation.Tanh, "
              "torch.nn.modules.linear.Identity");
  const fs::path weights =
      fs::exists(dir / "model.safetensors") ? dir / "model.safetensors" : dir / "pytorch_model.bin";
  const auto tensors = read_state_dict(weights.string());
  const auto in = config.at("in_features").get<int64_t>();
  const auto out = config.at("out_features").get<int64_t>();
  DenseModule dense;
  dense.tanh = activation == "torch.nn.modules.activation.Tanh";
  const auto weight = tensors.find("linear.weight");
  TORCH_CHECK(weight != tensors.end(), weights.string(), ": missing key 'linear.weight'");
  TORCH_CHECK(weight->second.sizes() == torch::IntArrayRef({out, in}), weights.string(),
              ": linear.weight: expected shape [", out, ", ", in, "] (", file.string(),
              "), but got ", weight->second.sizes());
  dense.weight = weight->second.to(torch::kFloat32);
  if (config.value("bias", true)) {
    const auto bias = tensors.find("linear.bias");
    TORCH_CHECK(bias != tensors.end(), weights.string(), ": missing key 'linear.bias'");
    dense.bias = bias->second.to(torch::kFloat32);
  }
  return dense;
}

/// The Transformer's sentence_bert_config.json: `max_seq_length` (published
/// format; today's writes it into the tokenizer's config instead).
void read_transformer(const fs::path& dir, SentenceModules& modules) {
  modules.transformer = dir.string();
  const fs::path file = dir / "sentence_bert_config.json";
  if (!fs::exists(file)) return;
  const json config = read_json(file);
  TORCH_CHECK(!config.value("do_lower_case", false), file.string(),
              ": do_lower_case true is not supported (lowercase the sentences before encode)");
  if (config.contains("max_seq_length") && !config.at("max_seq_length").is_null()) {
    modules.max_seq_length = config.at("max_seq_length").get<int64_t>();
  }
}

}  // namespace

SentenceModules read_sentence_modules(const std::string& directory) {
  const fs::path root(directory);
  SentenceModules modules;
  if (!fs::exists(root / "modules.json")) {
    read_transformer(root, modules);
    modules.pooling = {SentencePooling::kMean};
    return modules;
  }
  const fs::path file = root / "modules.json";
  const json list = read_json(file);
  TORCH_CHECK(list.is_array() && !list.empty(), file.string(), ": expected a list of modules");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string type = list[i].at("type").get<std::string>();
    const std::string kind = type.substr(type.rfind('.') + 1);  // the class
    const fs::path dir = root / list[i].value("path", "");
    TORCH_CHECK((kind == "Transformer") == (i == 0), file.string(),
                ": expected the Transformer module first and only there, but module ", i, " is '",
                type, "'");
    if (kind == "Transformer") {
      read_transformer(dir, modules);
    } else if (kind == "Pooling") {
      modules.pooling = read_pooling(dir);
    } else if (kind == "Dense") {
      modules.dense.push_back(read_dense(dir));
    } else if (kind == "Normalize") {
      modules.normalize = true;
    } else {
      TORCH_CHECK(false, file.string(), ": module '", type,
                  "' is not supported; supported: Transformer, Pooling, Dense, Normalize");
    }
  }
  TORCH_CHECK(!modules.pooling.empty(), file.string(),
              ": expected a Pooling module after the Transformer");
  return modules;
}

}  // namespace detail
}  // namespace mha
