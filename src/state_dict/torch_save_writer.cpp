// Writes a `torch.save`-format zip archive of a plain dict {name: tensor} with
// LibTorch's pickler and zip writer. Unlike `torch::pickle_save`, the pickler
// runs with `tag_aggregates=false`: otherwise the dict is wrapped in
// `torch.jit._pickle.restore_type_tag`, a global that Python's
// `torch.load(weights_only=True)` refuses.

#include <ATen/core/Dict.h>
#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include "state_dict/errors.h"
#include "state_dict/formats.h"

namespace mha {
namespace detail {

void write_torch_save(const NamedTensors& tensors, const std::string& path) {
  auto dict = c10::impl::GenericDict(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, tensor] : tensors) {
    if (dict.contains(name)) {
      fail_file(path, fmt::format("cannot write tensor '{}': the name is repeated", name));
    }
    dict.insert(name, tensor.detach().to(torch::kCPU));
  }
  std::vector<char> pickle;
  torch::jit::Pickler pickler(
      [&](const char* data, size_t size) { pickle.insert(pickle.end(), data, data + size); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(dict);
  pickler.stop();
  with_file_context(path, "cannot write the archive", [&] {
    caffe2::serialize::PyTorchStreamWriter writer(path);
    torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(),
                                       writer);
    writer.writeEndOfFile();
  });
}

}  // namespace detail
}  // namespace mha
