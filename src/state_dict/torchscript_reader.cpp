// Reads the named parameters and buffers of a TorchScript archive
// (`torch.jit.save(torch.jit.script(model), path)`) with `torch::jit::load`.

#include <torch/script.h>

#include "state_dict/errors.h"
#include "state_dict/formats.h"
#include "state_dict/pickle_value.h"

namespace mha {
namespace detail {

TensorMap read_torchscript(const std::string& path) {
  // Without the debug files (code/*.debug_pkl: source ranges for error
  // messages): the weights do not need them, and LibTorch's unpickler trusts
  // their lengths, so a corrupt one made it allocate tens of GB
  // (tests/fuzz/corpus/torchscript/regression-debug-pkl-length).
  const auto module = with_file_context(path, "cannot load the TorchScript archive", [&] {
    return torch::jit::load(path, torch::kCPU, /*load_debug_files=*/false);
  });
  TensorMap out;
  for (const auto& parameter : module.named_parameters(/*recurse=*/true)) {
    out.emplace(parameter.name, parameter.value.detach());
  }
  for (const auto& buffer : module.named_buffers(/*recurse=*/true)) {
    if (buffer.value.defined()) {
      out.emplace(buffer.name, buffer.value.detach());
    }
  }
  // LibTorch's unpickler rebuilds each tensor as a view of its storage
  // without checking that the view fits (a corrupt size, stride or offset
  // made a 16-byte storage's view read past it:
  // tests/fuzz/corpus/torchscript/regression-view-past-storage).
  for (const auto& [name, tensor] : out) {
    with_file_context(path, "cannot load the TorchScript archive: tensor '" + name + "'", [&] {
      check_view(tensor.sizes().vec(), tensor.strides().vec(), tensor.storage_offset(),
                 static_cast<int64_t>(tensor.element_size()), tensor.storage().nbytes());
    });
  }
  return out;
}

}  // namespace detail
}  // namespace mha
