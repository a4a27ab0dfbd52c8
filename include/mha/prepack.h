#pragma once

// Serving weights held once, in the layout of the GEMM that reads them: the
// projections of mha's modules and LibTorch's `torch::nn::Linear` modules
// converted, in place, to oneDNN's blocked float32 form or to mha's panels
// (IPEX's `ipex.optimize` and CTranslate2's load-time conversion are the models).

#include <c10/util/Exception.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <optional>

namespace mha {

/// Options of `prepack`: what it converts.
struct PrepackOptions {
  /// The input and output projections of every `MultiheadAttention` (the
  /// packed `in_proj_weight`, or the separate `q/k/v_proj_weight`, and `out_proj`).
  TORCH_ARG(bool, attention) = true;
  /// Every other `torch::nn::Linear`: the Transformer layers' feed-forward
  /// `linear1`/`linear2`, and a model's own (an output projection).
  TORCH_ARG(bool, linears) = true;
  /// true: mha's own layout and GEMM (false: oneDNN's): each weight in panels of
  /// 16 output features, streamed once per call while a tile of input rows
  /// stays in registers. At 1-16 input rows (decode steps, beams) it takes
  /// 0.3-0.9x oneDNN's time, at 64 rows 0.76-0.99x, at 256 0.97-1.03x; at
  /// thousands of rows on 2 threads up to 1.2x (docs/weights.md). Same
  /// memory; needs no oneDNN. Every output element sums in one fixed order
  /// (blocks of 256 input features in input order), so a row's result never
  /// depends on the other rows or the thread count.
  /// Unset: oneDNN's layout on an Intel CPU with AVX-512 (there the panels
  /// took 0.95-1.19x oneDNN's time per GEMM from 1,024 rows, on a Xeon);
  /// panels elsewhere: without AVX-512 (a sequence-first
  /// `MultiheadAttention(512, 8)` call took 0.48-0.93x its time in oneDNN's
  /// layout at 1 to 1,024 tokens, a BERT-base call 0.75-0.87x, on an AVX2 AMD
  /// EPYC), on AMD's AVX-512 (Zen 4: 0.56-1.00x and 0.81-1.04x; an encoder
  /// layer at 4 x 1,024 tokens 1.03-1.09x) and where LibTorch lacks oneDNN's ops.
  TORCH_ARG(std::optional<bool>, panels) = std::nullopt;
};

/// Converts, in place and for inference, the float32 CPU projections of
/// `module` and of every module under it (`MultiheadAttention`, the
/// Transformer layers and stacks, `torch::nn::Linear`) to weights prepacked
/// by oneDNN (`mkldnn::_reorder_linear_weight`), which every later call
/// multiplies with oneDNN's GEMM (`mkldnn::_linear_pointwise`): the form
/// PyTorch's frozen CPU inference uses; or to mha's panels, multiplied by
/// mha's own GEMM (`PrepackOptions::panels`: by default where the CPU lacks
/// AVX-512). Each weight is then held once, by the
/// module that owns it: a converted parameter keeps its name but holds no
/// elements (a float32 tensor of shape (0)) and its packed form is the child
/// module `<name>_packed`, freed with the module.
///
/// The contract for edits: the packed form is the only copy, so no edit of
/// the old float tensor can leave it stale. In-place ops on the parameter
/// (`.data()`, `data_ptr()`, `copy_`) meet an empty tensor; a weight given
/// back with `set_data` is computed with as it is, in float; `torch::load`
/// and `mha::load_state_dict` repack the loaded values; `to()` another dtype
/// or device throws (`unpack` first); `quantize_dynamic` quantizes the
/// values. `state_dict`, `torch::save`, `clone()` and `unpack` give the float
/// values back bit for bit (the packing permutes them).
///
/// Results agree with the float module within float32 rounding (mha's
/// kernels are taken for every fast-path call: Python's native op takes
/// float weights); with `set_python_kernels(true)` the float values are
/// unpacked per call and the results are Python's bits. The module computes
/// without autograd: its parameters stop requiring grad.
///
/// Throws `c10::Error`, changing nothing, for weights that are not float32
/// on the CPU, a tensor-parallel module, or `panels(false)` on a LibTorch
/// without oneDNN's ops.
/// Weights already converted (prepacked or int8) are left as they are.
///
/// Example:
/// ```
/// mha::TransformerEncoderLayer layer(mha::TransformerLayerOptions(512, 8).batch_first(true));
/// layer->eval();
/// mha::prepack(*layer);
/// torch::InferenceMode guard;
/// auto out = layer(torch::randn({2, 16, 512}));  // GEMMs on packed weights
/// ```
void prepack(torch::nn::Module& module, const PrepackOptions& options = {});

/// `prepack` of the module `module` holds.
template <typename ModuleType>
void prepack(const torch::nn::ModuleHolder<ModuleType>& module,
             const PrepackOptions& options = {}) {
  TORCH_CHECK_VALUE(!module.is_empty(),
                    "prepack: expected module to hold a module, but got an empty holder (nullptr)");
  prepack(*module.ptr(), options);
}

/// Whether `prepack` converted any weight of `module` or of a module under it.
bool is_prepacked(const torch::nn::Module& module);

/// Undoes `prepack`: every prepacked weight of `module` and of the modules
/// under it (the stacks' prototype layers included) is a float32 parameter
/// again, holding its values bit for bit, and the `<name>_packed` children
/// are gone; the module then converts with `to()` as any other. Their
/// owners' parameters require grad again, as a freshly built module's
/// (`prepack` turned it off; LibTorch's matmul picks its kernel by it even
/// without grad mode, so the float module's bits need it). An LM head tied to
/// its embeddings keeps a copy of them until the model's next `to()`,
/// `clone()` or `torch::load`, which ties it again. int8 weights
/// (`quantize_dynamic`) are left as they are; a module without prepacked
/// weights is left unchanged.
void unpack(torch::nn::Module& module);

/// `unpack` of the module `module` holds.
template <typename ModuleType>
void unpack(const torch::nn::ModuleHolder<ModuleType>& module) {
  TORCH_CHECK_VALUE(!module.is_empty(),
                    "unpack: expected module to hold a module, but got an empty holder (nullptr)");
  unpack(*module.ptr());
}

}  // namespace mha
