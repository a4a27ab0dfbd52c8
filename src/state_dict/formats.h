#pragma once

// The weights file formats: detection from content, readers and writers.
// Each reader returns CPU tensors by name and throws `c10::Error` messages
// that start with the file's path.

#include <mha/state_dict.h>
#include <torch/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mha {
namespace detail {

using TensorMap = std::map<std::string, torch::Tensor>;
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// What a weights file holds, from its first bytes (and, for zip archives,
/// from the records they hold).
enum class FileFormat {
  kTorchSave,    ///< torch.save zip archive (data.pkl, data/<storage>)
  kTorchScript,  ///< torch.jit.save zip archive (also constants.pkl, code/)
  kSafetensors,  ///< 8-byte header size, JSON header, tensor data
};

/// Detects the format of `path`; throws for a missing file, an empty or
/// truncated one, the legacy (pre-1.6) torch.save format and unknown content.
FileFormat detect_format(const std::string& path);

/// Name of a format for messages ("torch.save archive", ...).
const char* format_name(FileFormat format);

/// torch_save_reader.cpp: the tensors by the naming rules of mha/state_dict.h,
/// and the skipped paths.
ReadResult read_torch_save(const std::string& path);
/// torchscript_reader.cpp
TensorMap read_torchscript(const std::string& path);
/// safetensors_reader.cpp
TensorMap read_safetensors(const std::string& path);

/// torch_save_writer.cpp: a zip archive that Python's
/// `torch.load(path, weights_only=True)` reads as a dict of tensors.
void write_torch_save(const NamedTensors& tensors, const std::string& path);
/// safetensors_writer.cpp
void write_safetensors(const NamedTensors& tensors, const std::string& path);

}  // namespace detail
}  // namespace mha
