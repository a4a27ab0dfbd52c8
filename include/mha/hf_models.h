#pragma once

// Whole Hugging Face models: a checkpoint directory becomes one LibTorch
// module called with token ids or pixels, embeddings and heads included, as
// transformers' `AutoModel` / `AutoModelForSeq2SeqLM` / `AutoModelForCausalLM`
// give it. `load_hf_model` reads the directory and returns the class its
// `model_type` needs:
//   bert, roberta, distilbert, electra  -> mha::TextEncoderModel, or with the
//                                          task head config.json's `architectures`
//                                          names, mha::TextTaskModel
//   vit, deit                           -> mha::VisionEncoderModel, or mha::ImageClassifier
//   bart, mbart, marian                 -> mha::Seq2SeqLM
//   gpt2, opt                           -> mha::CausalLM
// The layers are mha's Transformer classes (Python's numbers); what each
// family adds around them follows transformers 5.23's modeling_*.py.

#include <mha/hf_encoder_models.h>
#include <mha/hf_language_models.h>
#include <mha/hf_task_models.h>
#include <mha/hugging_face.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace mha {

/// Every `model_type` `load_hf_model` takes, sorted.
std::vector<std::string> hf_model_types();

/// The class `load_hf_model` returns for `model_type` without a task head
/// ("TextEncoderModel", "VisionEncoderModel", "Seq2SeqLM", "CausalLM"), or ""
/// for another (`HfModel::class_name` names the class of a model loaded).
std::string hf_model_class(const std::string& model_type);

/// Options of `load_hf_model`.
struct HfModelLoadOptions {
  /// The dtype the model computes in. Weights stored in float16 or bfloat16
  /// load as float32 unless another dtype is asked for here.
  TORCH_ARG(torch::Dtype, dtype) = torch::kFloat32;
  /// Fast by default: a float32 model's projections and LM head are held
  /// prepacked (`mha::prepack`, a load-time conversion as CTranslate2's and
  /// IPEX's; in mha's panels or oneDNN's layout, see `decoder_panels` and
  /// `encoder_panels`), so every call runs GEMMs
  /// on weights laid out for them; results within float32 rounding of the float weights' (within
  /// 1e-5 of transformers in the tests). `to()` another dtype or device,
  /// `clone()`, `torch::save` / `torch::load`, `state_dict` and
  /// `mha::quantize_dynamic` work on it (from the float values the packing
  /// keeps); `mha::unpack` gives the float parameters back. false: the float
  /// tensors as read, Python's kernels' bits with `set_python_kernels(true)`
  /// and training possible. No effect for another dtype, or where LibTorch
  /// lacks oneDNN's ops.
  TORCH_ARG(bool, prepack) = true;
  /// With `prepack`, a `Seq2SeqLM`'s or `CausalLM`'s decoder layers and LM
  /// head are held in mha's panels (`PrepackOptions::panels`) instead of
  /// oneDNN's layout: their calls are decode steps of one to a few dozen
  /// rows, which mha's panel GEMM runs in 0.3-0.99x oneDNN's time (a causal
  /// LM's prompt of hundreds of tokens in about 1.0x). false: in oneDNN's
  /// layout. Other models: no effect.
  TORCH_ARG(bool, decoder_panels) = true;
  /// With `prepack`, the other weights (an encoder model's, a `Seq2SeqLM`'s
  /// encoder) in mha's panels (true) or oneDNN's layout (false). Unset:
  /// `prepack`'s default (`PrepackOptions::panels`), panels but on an Intel
  /// CPU with AVX-512 (a BERT-base call in panels took 0.75-0.87x its time in
  /// oneDNN's layout on 1 thread, 0.71-0.97x on 2, at 16 to 1,024 rows on an
  /// AVX2 AMD EPYC; 0.81-1.04x on an AVX-512 one, Zen 4).
  TORCH_ARG(std::optional<bool>, encoder_panels) = std::nullopt;
};

/// A model read by `load_hf_model`: one of the six classes, in eval mode.
struct HfModel {
  /// Any of the classes.
  using Module = std::variant<TextEncoderModel,
                              VisionEncoderModel,
                              TextTaskModel,
                              ImageClassifier,
                              Seq2SeqLM,
                              CausalLM>;
  /// The config's `model_type`.
  std::string model_type;
  /// The module.
  Module module{TextEncoderModel(nullptr)};

  /// The module as `ModuleType` (e.g. `mha::CausalLM`); throws `c10::Error`
  /// naming the class it is when it is another.
  template <typename ModuleType>
  ModuleType as() const {
    const ModuleType* model = std::get_if<ModuleType>(&module);
    TORCH_CHECK(model != nullptr, "HfModel: model_type '", model_type, "' is a ", class_name(),
                ", not the class asked for");
    return *model;
  }
  /// The module's class ("mha::TextTaskModel", ...).
  std::string class_name() const;
  /// The module as a `torch::nn::Module` (parameters, `to()`, `torch::save` ...).
  torch::nn::Module& base() const;
};

/// Reads a Hugging Face model directory (`read_hf_checkpoint`: config.json
/// and the weights, safetensors, shards or pytorch_model.bin, as transformers
/// 5.x writes them or in the older published layouts) into the class its
/// `model_type` needs (`hf_model_class`). Throws `c10::Error` naming the
/// directory: an unsupported model_type (listing `hf_model_types()`), a config
/// field a family needs, a missing key (with its file) or a shape the config
/// does not give; nothing is returned half-loaded. The model is prepacked
/// (`HfModelLoadOptions::prepack`) unless asked otherwise.
///
/// Example:
/// ```
/// auto model = mha::load_hf_model("gpt2-dir").as<mha::CausalLM>();
/// auto logits = model(torch::tensor({{464, 3290, 318}}));  // (1, 3, vocab_size)
/// ```
HfModel load_hf_model(const std::string& directory, const HfModelLoadOptions& options = {});

/// `load_hf_model` of a checkpoint already read.
HfModel load_hf_model(const HfCheckpoint& checkpoint, const HfModelLoadOptions& options = {});

}  // namespace mha
