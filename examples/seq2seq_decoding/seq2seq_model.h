#pragma once

// The toy seq2seq model of scripts/export_seq2seq_reference.py (token and
// position embeddings, an nn.Transformer, a Linear to the vocabulary), built
// from the options and weights that script saves, and its greedy decoding
// with mha::TransformerDecoderCache: one new position through the decoder per
// step. Shared by the example and tests/transformer_decoding_test.cpp.

#include <mha/quantization.h>
#include <mha/state_dict.h>
#include <mha/transformer.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace seq2seq {

/// The "config.*" entries of a reference file.
struct Config {
  int64_t d_model, nhead, num_layers, dim_feedforward, vocab, max_len, bos;
  bool norm_first, gelu, batch_first;
};

/// The options saved in `file` (read by `mha::read_state_dict`).
inline Config read_config(const std::map<std::string, torch::Tensor>& file) {
  auto get = [&](const std::string& key) { return file.at("config." + key).item<int64_t>(); };
  return Config{get("d_model"),   get("nhead"),           get("num_layers"), get("dim_feedforward"),
                get("vocab"),     get("max_len"),         get("bos"),        get("norm_first") != 0,
                get("gelu") != 0, get("batch_first") != 0};
}

/// Python's `Seq2Seq` module: the same submodule names, so its state_dict loads as is.
struct ModelImpl : torch::nn::Module {
  explicit ModelImpl(const Config& c)
      : config(c),
        embed(register_module("embed", torch::nn::Embedding(c.vocab, c.d_model))),
        pos(register_module("pos", torch::nn::Embedding(c.max_len, c.d_model))),
        transformer(register_module(
            "transformer",
            mha::Transformer(mha::TransformerOptions(c.d_model, c.nhead, c.num_layers, c.num_layers)
                                 .dim_feedforward(c.dim_feedforward)
                                 .dropout(0.0)
                                 .activation(c.gelu ? mha::TransformerActivation(torch::kGELU)
                                                    : mha::TransformerActivation(torch::kReLU))
                                 .batch_first(c.batch_first)
                                 .norm_first(c.norm_first)))),
        out(register_module("out", torch::nn::Linear(c.d_model, c.vocab))) {}

  /// (N, L) ids at positions [start, start + L) -> (N, L, E), or (L, N, E) sequence-first.
  torch::Tensor inputs(const torch::Tensor& ids, int64_t start) {
    const torch::Tensor x = embed(ids) + pos(torch::arange(start, start + ids.size(1)));
    return config.batch_first ? x : x.transpose(0, 1);
  }

  /// Decoder output (N, L, E) or (L, N, E) -> logits (N, L, vocab).
  torch::Tensor logits(const torch::Tensor& decoded) {
    // mha::linear: out's forward, on its int8 weights once mha::quantize_dynamic converted it
    return mha::linear(out, config.batch_first ? decoded : decoded.transpose(0, 1));
  }

  Config config;
  torch::nn::Embedding embed;
  torch::nn::Embedding pos;
  mha::Transformer transformer;
  torch::nn::Linear out;
};
TORCH_MODULE(Model);

/// The model of a reference file, weights loaded, in eval mode.
inline Model load_model(const std::map<std::string, torch::Tensor>& file) {
  Model model(read_config(file));
  mha::load_state_dict(*model, file, mha::LoadOptions().prefix("model."));
  model->eval();
  return model;
}

/// Greedy decoding of `steps` tokens after BOS with a decoder cache: the
/// encoder runs once, then each step feeds only the newest token through the
/// decoder. `src_key_padding_mask` (N, S) bool or undefined. Returns the
/// tokens (N, 1 + steps), BOS first, and each step's logits (steps, N, vocab).
inline std::pair<torch::Tensor, torch::Tensor> greedy_decode(
    Model& model,
    const torch::Tensor& src,
    const torch::Tensor& src_key_padding_mask,
    int64_t steps) {
  torch::NoGradGuard no_grad;
  auto& t = model->transformer;
  const torch::Tensor memory = t->encode(model->inputs(src, 0), {}, src_key_padding_mask);
  auto cache = t->make_decoder_cache(steps);
  torch::Tensor tokens = torch::full({src.size(0), 1}, model->config.bos, torch::kLong);
  std::vector<torch::Tensor> step_logits;
  for (int64_t step = 0; step < steps; ++step) {
    const torch::Tensor newest = tokens.narrow(1, step, 1);  // (N, 1)
    const torch::Tensor decoded =
        t->decode_cached(model->inputs(newest, step), memory, cache, {}, src_key_padding_mask);
    step_logits.push_back(model->logits(decoded).select(1, 0));  // (N, vocab)
    tokens = torch::cat({tokens, step_logits.back().argmax(-1, /*keepdim=*/true)}, 1);
  }
  return {tokens, torch::stack(step_logits)};
}

}  // namespace seq2seq
