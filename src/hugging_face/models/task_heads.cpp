// The task head of config.json's `architectures` (transformers 5.23's
// AutoModelFor* classes of bert, roberta, distilbert, electra, vit, deit) and
// `id2label` (configuration_utils.py, PretrainedConfig).

#include "hugging_face/models/task_heads.h"

#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace mha {

std::string hf_task_name(HfTask task) {
  // In HfTask's order.
  static const char* const kSuffixes[] = {"ForSequenceClassification", "ForTokenClassification",
                                          "ForQuestionAnswering", "ForImageClassification"};
  return kSuffixes[static_cast<size_t>(task)];
}

namespace detail {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The heads mha builds, text or vision (DeiT's teacher first: its class
/// name ends as the other's does not).
const std::vector<HfHead>& heads(bool vision) {
  static const std::vector<HfHead> text = {{HfTask::kSequenceClassification},
                                           {HfTask::kTokenClassification},
                                           {HfTask::kQuestionAnswering}};
  static const std::vector<HfHead> image = {{HfTask::kImageClassification, true},
                                            {HfTask::kImageClassification}};
  return vision ? image : text;
}

/// transformers' class name suffix of `head` ("ForImageClassificationWithTeacher", ...).
std::string suffix_of(const HfHead& head) {
  return hf_task_name(head.task) + (head.with_teacher ? "WithTeacher" : "");
}

}  // namespace

std::optional<HfHead> hf_head(const HfCheckpoint& checkpoint) {
  const auto architectures = checkpoint.config.strings("architectures");
  if (architectures.empty()) return std::nullopt;
  const std::string& name = architectures.front();
  const bool vision = checkpoint.model_type == "vit" || checkpoint.model_type == "deit";
  for (const HfHead& head : heads(vision)) {
    if (ends_with(name, suffix_of(head)) &&
        (!head.with_teacher || checkpoint.model_type == "deit")) {
      return head;
    }
  }
  for (const char* base : {"Model", "ForMaskedLM", "ForPreTraining", "ForMaskedImageModeling"}) {
    if (ends_with(name, base)) return std::nullopt;
  }
  std::string supported = "the base model (...Model, ...ForMaskedLM, ...ForPreTraining)";
  for (const HfHead& head : heads(vision)) supported += ", ..." + suffix_of(head);
  TORCH_CHECK(false, checkpoint.config.source(), ": architectures '", name,
              "' is not supported by load_hf_model for model_type '", checkpoint.model_type,
              "'; supported: ", supported);
  return std::nullopt;
}

std::vector<std::string> hf_id2label(const HfConfig& config) {
  const auto parsed = nlohmann::json::parse(config.json_text("id2label"));
  if (parsed.is_null()) {
    std::vector<std::string> labels;
    for (int64_t i = 0; i < config.integer("num_labels", 2); ++i) {
      labels.push_back("LABEL_" + std::to_string(i));
    }
    return labels;
  }
  TORCH_CHECK(parsed.is_object(), config.source(),
              ": expected id2label to be an object of ids to names, but got ", parsed.dump());
  std::vector<std::string> labels(parsed.size());
  for (const auto& [key, name] : parsed.items()) {
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    TORCH_CHECK(used == key.size() && id >= 0 && id < static_cast<int64_t>(labels.size()) &&
                    name.is_string(),
                config.source(), ": expected id2label to map the ids 0 to ", labels.size() - 1,
                " to names, but got \"", key, "\": ", name.dump());
    labels[static_cast<size_t>(id)] = name.get<std::string>();
  }
  return labels;
}

}  // namespace detail
}  // namespace mha
