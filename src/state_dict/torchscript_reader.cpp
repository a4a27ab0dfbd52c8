// Reads the named parameters and buffers of a TorchScript archive
// (`torch.jit.save(torch.jit.script(model), path)`) with `torch::jit::load`.

#include <torch/script.h>

#include <filesystem>
#include <string_view>

#include "state_dict/errors.h"
#include "state_dict/formats.h"
#include "state_dict/pickle_reader.h"
#include "state_dict/pickle_value.h"
#include "state_dict/torch_save_archive.h"

namespace mha {
namespace detail {
namespace {

/// Checks, before LibTorch's unpickler reads the archive, that each storage its
/// data.pkl names fits the record it names. LibTorch sizes a storage by the
/// element count the pickle claims and hands it the record's bytes, however
/// few: a corrupt key or count made a 16-byte record a 64-byte storage, which
/// no check after the load can see
/// (tests/fuzz/corpus/torchscript/regression-view-past-storage). data.pkl is
/// scanned by the weights-only reader with TorchScript's classes as opaque
/// objects and storages on the meta device: nothing is imported or allocated.
void check_storage_records(const std::string& path) {
  const auto reader = open_torch_save(path);
  const uint64_t file_size = std::filesystem::file_size(path);
  const auto [data, size] = with_file_context(path, "corrupt record 'data.pkl'",
                                              [&] { return reader->getRecord("data.pkl"); });
  const std::string_view pickle(static_cast<const char*>(data.get()), size);
  const StorageLoader fits = [&](const std::string& key, c10::ScalarType dtype, int64_t numel) {
    const StorageRecord record = storage_record(*reader, file_size, key, dtype, numel);
    return torch::empty({static_cast<int64_t>(record.nbytes)},
                        torch::TensorOptions().dtype(torch::kUInt8).device(torch::kMeta))
        .storage();
  };
  ValueArena arena(/*copy_budget=*/pickle.size());
  with_file_context(path, "cannot load the TorchScript archive: data.pkl", [&] {
    read_weights_pickle(pickle, fits, arena, PickleDialect::kTorchScriptScan);
  });
}

}  // namespace

TensorMap read_torchscript(const std::string& path) {
  check_storage_records(path);
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
