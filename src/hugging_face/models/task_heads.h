#pragma once

// Private: the task head a checkpoint's config.json names in `architectures`
// (transformers 5.23's class names) and its labels.

#include <mha/hf_task_models.h>
#include <mha/hugging_face.h>

#include <optional>
#include <string>
#include <vector>

namespace mha {
namespace detail {

/// A head `load_hf_model` builds: its task, and for DeiT whether with the teacher's classifier.
struct HfHead {
  HfTask task;
  bool with_teacher = false;
};

/// The head of an encoder checkpoint's first `architectures` entry: nullopt
/// for the base model (no entry, `...Model`) and for heads whose base model
/// is loaded without them (`...ForMaskedLM`, `...ForPreTraining`,
/// `...ForMaskedImageModeling`). Throws `c10::Error` naming the entry and
/// the supported ones for another head (`BertForMultipleChoice`, ...).
std::optional<HfHead> hf_head(const HfCheckpoint& checkpoint);

/// config.json's `id2label` by id; LABEL_0 ... LABEL_{n-1} for `num_labels`
/// (2 when absent) without it, as transformers' PretrainedConfig makes them.
std::vector<std::string> hf_id2label(const HfConfig& config);

}  // namespace detail
}  // namespace mha
