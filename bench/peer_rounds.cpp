// peer_rounds: mha's side of one round of scripts/bench_peers.py, which times
// mha against ONNX Runtime, AOTInductor, CTranslate2 and transformers on the
// same weights.
// The Python side writes a case file (torch.save, read by
// mha::read_state_dict) and runs this binary between its own engines' calls,
// so that every engine sees the same machine load. This binary builds the
// case's mha module from the file, makes `--warmup` calls, times `--iters`
// calls one by one under torch::InferenceMode on `--threads` intra-op threads
// (at::set_num_threads) and prints "median_ms <ms>"; `--out` receives the last
// call's output as raw bytes (float32, or int64 tokens) for the cross-check.
//
// Case files ("model." holds the module's state_dict, "config.*" are 0-d int64):
//   attention      nn.MultiheadAttention, config.embed_dim, config.num_heads;
//                  "input" (L, N, E): self-attention, need_weights=false
//   encoder_layer  nn.TransformerEncoderLayer, config.d_model, config.nhead,
//                  config.dim_feedforward, config.batch_first; "input"
//   decode         the seq2seq model of scripts/export_seq2seq_reference.py
//                  (examples/seq2seq_decoding/seq2seq_model.h); "src" (N, S)
//                  ids, "steps" (0-d): greedy decoding of that many tokens,
//                  output (N, 1 + steps) int64, BOS first
//   generate       a case file inside a Hugging Face seq2seq or causal LM's directory
//                  (the model: mha::load_hf_model of that directory, its
//                  generation_config.json): "input_ids" (N, S) sources or
//                  prompts, "config.num_beams", "config.max_new_tokens";
//                  mha::generate, output (N, 1 + max_new_tokens) int64, or
//                  (N, S + max_new_tokens) for a causal LM
//   bert           a case file inside a Hugging Face BERT model's directory
//                  (the model: mha::load_hf_model of that directory as a
//                  mha::TextEncoderModel): "input_ids" (N, L),
//                  "attention_mask" (N, L); output last_hidden_state (N, L,
//                  hidden) float32
//
// --precision (decode): float32 (default: every case's weights prepacked by
// mha::prepack, a server's choice; onednn or panels: in that layout); int8: mha::quantize_dynamic
// of every linear (the output projection too); bf16: the model ->to(kBFloat16). (generate, bert):
// float32, the model as load_hf_model gives it (prepacked); float: loaded with
// HfModelLoadOptions().prepack(false), the float tensors as read; onednn: decoder_panels(false) and
// encoder_panels(false), every weight in oneDNN's layout; panels: encoder_panels(true), every
// weight in panels. (attention, encoder_layer): float32, prepacked in mha::prepack's layout for
// this CPU; onednn or panels: in that layout.
// --memory: instead of timing, prints "model_bytes <b> embedding_bytes <b>":
// the heap bytes (glibc's mallinfo2, which also sees FBGEMM's packed weights
// outside any tensor) that building, loading and converting the model kept,
// and the embeddings' share of them (they stay float32).
//
// Usage: peer_rounds --case=NAME --weights=FILE --threads=T --iters=K
//                    [--warmup=W] [--out=FILE] [--precision=P] [--memory]

#include <ATen/Parallel.h>
#include <malloc.h>
#include <mha/generation.h>
#include <mha/hf_models.h>
#include <mha/prepack.h>
#include <mha/quantization.h>
#include <mha/state_dict.h>
#include <mha/transformer.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "seq2seq_model.h"

namespace {

using torch::Tensor;
using File = std::map<std::string, Tensor>;
/// One call of a case's module on its input: the output.
using Call = std::function<Tensor()>;

/// The command line, `--name=value` each.
struct Args {
  std::string case_name, weights, out, precision = "float32";
  int threads = 1, iters = 10, warmup = 2;
  bool memory = false;
};

/// The arguments; throws c10::Error on an unknown or missing one.
Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    const std::string key = arg.substr(0, eq), value = eq == arg.npos ? "" : arg.substr(eq + 1);
    if (key == "--case")
      args.case_name = value;
    else if (key == "--weights")
      args.weights = value;
    else if (key == "--out")
      args.out = value;
    else if (key == "--threads")
      args.threads = std::stoi(value);
    else if (key == "--iters")
      args.iters = std::stoi(value);
    else if (key == "--warmup")
      args.warmup = std::stoi(value);
    else if (key == "--precision")
      args.precision = value;
    else if (key == "--memory")
      args.memory = true;
    else
      TORCH_CHECK(false, "peer_rounds: unknown argument ", arg);
  }
  TORCH_CHECK(!args.case_name.empty() && !args.weights.empty() && args.iters > 0,
              "usage: peer_rounds --case=NAME --weights=FILE --threads=T --iters=K "
              "[--warmup=W] [--out=FILE] [--precision=P] [--memory]");
  TORCH_CHECK(args.precision == "float32" || args.precision == "int8" || args.precision == "bf16" ||
                  args.precision == "float" || args.precision == "onednn" ||
                  args.precision == "panels",
              "peer_rounds: --precision is float32, int8, bf16, float, onednn or panels, not ",
              args.precision);
  return args;
}

/// The weight layout `precision` asks for: panels (true), oneDNN's (false),
/// or unset (mha::prepack's layout for this CPU).
std::optional<bool> panels_of(const std::string& precision) {
  if (precision == "panels") return true;
  if (precision == "onednn") return false;
  return std::nullopt;
}

/// The file's 0-d "config.<key>".
int64_t config_value(const File& file, const std::string& key) {
  return file.at("config." + key).item<int64_t>();
}

/// mha::MultiheadAttention on the file's input, q = k = v, without weights,
/// sequence-first as the peers export it (nn.MultiheadAttention's default):
/// (L, N, E) in and out, mha's kernels on strided views, prepacked (`panels_of`).
Call attention(const File& file, const std::string& precision) {
  mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(config_value(file, "embed_dim"),
                                                              config_value(file, "num_heads")));
  mha::load_state_dict(attn, file, mha::LoadOptions().prefix("model."));
  attn->eval();
  mha::prepack(attn, mha::PrepackOptions().panels(panels_of(precision)));
  const Tensor x = file.at("input");  // (L, N, E)
  return [attn, x]() mutable {
    return std::get<0>(attn->forward(x, x, x, {}, /*need_weights=*/false));  // (L, N, E)
  };
}

/// mha::TransformerEncoderLayer (ReLU, post-norm) on the file's input,
/// prepacked (`panels_of`).
Call encoder_layer(const File& file, const std::string& precision) {
  mha::TransformerEncoderLayer layer(mha::TransformerEncoderLayerOptions(
                                         config_value(file, "d_model"), config_value(file, "nhead"))
                                         .dim_feedforward(config_value(file, "dim_feedforward"))
                                         .batch_first(config_value(file, "batch_first") != 0));
  mha::load_state_dict(layer, file, mha::LoadOptions().prefix("model."));
  layer->eval();
  mha::prepack(layer, mha::PrepackOptions().panels(panels_of(precision)));
  const Tensor x = file.at("input");  // (N, L, E) or (L, N, E)
  return [layer, x]() mutable { return layer(x); };
}

/// The seq2seq example's model of `file` in `precision`.
seq2seq::Model decode_model(const File& file, const std::string& precision) {
  seq2seq::Model model = seq2seq::load_model(file);
  if (precision == "float32" || precision == "onednn" || precision == "panels")
    mha::prepack(model, mha::PrepackOptions().panels(panels_of(precision)));
  if (precision == "int8") mha::quantize_dynamic(model);
  if (precision == "bf16") model->to(torch::kBFloat16);
  return model;
}

/// Greedy decoding with the seq2seq example's model and decoder cache.
Call decode(const File& file, const std::string& precision) {
  seq2seq::Model model = decode_model(file, precision);
  const Tensor src = file.at("src");  // (N, S)
  const int64_t steps = file.at("steps").item<int64_t>();
  return [model, src, steps]() mutable {
    return seq2seq::greedy_decode(model, src, {}, steps).first;  // (N, 1 + steps)
  };
}

/// The Hugging Face model of the directory holding the case file `path`, as
/// loaded (`precision` float32: prepacked), with float weights ("float") or
/// with every weight in oneDNN's layout ("onednn") or in panels ("panels").
mha::HfModel hf_model(const std::string& path, const std::string& precision) {
  const std::string directory = std::filesystem::path(path).parent_path().string();
  return mha::load_hf_model(directory, mha::HfModelLoadOptions()
                                           .prepack(precision != "float")
                                           .decoder_panels(precision != "onednn")
                                           .encoder_panels(panels_of(precision)));
}

/// mha::generate with the Hugging Face model (a Seq2SeqLM or a CausalLM) of
/// the directory holding the case file `path` (`hf_model`).
Call generate(const std::string& path, const File& file, const std::string& precision) {
  const std::string directory = std::filesystem::path(path).parent_path().string();
  const mha::HfModel loaded = hf_model(path, precision);
  const mha::GenerationConfig config = mha::read_generation_config(directory)
                                           .num_beams(config_value(file, "num_beams"))
                                           .max_new_tokens(config_value(file, "max_new_tokens"));
  const Tensor ids = file.at("input_ids");  // (N, S) sources or (N, L) prompts
  return std::visit(
      [&](auto model) -> Call {
        using Model = decltype(model);
        if constexpr (std::is_same_v<Model, mha::Seq2SeqLM> ||
                      std::is_same_v<Model, mha::CausalLM>) {
          return [model, config, ids]() mutable {
            return mha::generate(model, ids, Tensor(), config);  // (N, 1 + T) or (N, L + T)
          };
        } else {
          TORCH_CHECK(false, "peer_rounds: generate needs a seq2seq or causal LM, not model_type '",
                      loaded.model_type, "'");
          return Call();
        }
      },
      loaded.module);
}

/// The BERT model of the directory holding the case file `path`
/// (`hf_model`) on the file's ids and attention mask: last_hidden_state.
Call bert(const std::string& path, const File& file, const std::string& precision) {
  auto model = hf_model(path, precision).as<mha::TextEncoderModel>();
  const Tensor ids = file.at("input_ids"), mask = file.at("attention_mask");  // (N, L)
  return [model, ids, mask]() mutable {
    return model(ids, mask).last_hidden_state;  // (N, L, hidden)
  };
}

/// The call of case `name` ("attention", "encoder_layer", "decode", "generate" or "bert").
Call make_call(const Args& args, const File& file) {
  const std::string& name = args.case_name;
  TORCH_CHECK(name == "decode" || args.precision == "float32" || args.precision == "onednn" ||
                  args.precision == "panels" ||
                  ((name == "generate" || name == "bert") && args.precision == "float"),
              "peer_rounds: --precision ", args.precision, " is not for the ", name, " case");
  if (name == "attention") return attention(file, args.precision);
  if (name == "encoder_layer") return encoder_layer(file, args.precision);
  if (name == "generate") return generate(args.weights, file, args.precision);
  if (name == "bert") return bert(args.weights, file, args.precision);
  TORCH_CHECK(name == "decode", "peer_rounds: unknown case ", name);
  return decode(file, args.precision);
}

/// The heap bytes the decode case's model holds in `precision`, and its embeddings'.
void print_model_bytes(const File& file, const std::string& precision) {
  const size_t before = mallinfo2().uordblks + mallinfo2().hblkhd;
  seq2seq::Model model = decode_model(file, precision);
  const size_t after = mallinfo2().uordblks + mallinfo2().hblkhd;
  const int64_t embeddings = model->embed->weight.nbytes() + model->pos->weight.nbytes();
  std::printf("model_bytes %zu embedding_bytes %lld\n", after - before,
              static_cast<long long>(embeddings));
}

/// The median of `values` (not empty).
double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/// The tensor's elements, contiguous, as raw bytes.
void write_raw(const Tensor& tensor, const std::string& path) {
  const Tensor t = tensor.contiguous();
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  TORCH_CHECK(out.good(), "peer_rounds: cannot write ", path);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  at::set_num_threads(args.threads);
  const File file = mha::read_state_dict(args.weights);
  if (args.memory) {
    print_model_bytes(file, args.precision);
    return 0;
  }
  Call call = make_call(args, file);
  c10::InferenceMode inference;
  Tensor out;
  for (int i = 0; i < args.warmup; ++i) out = call();
  std::vector<double> ms;
  for (int i = 0; i < args.iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    out = call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::printf("median_ms %.4f\n", median(ms));
  if (!args.out.empty()) write_raw(out, args.out);
  return 0;
}
