// mha::SentenceTransformer: sentence-transformers 6.3's SentenceTransformer
// (base/modules/transformer.py, sentence_transformer/modules/pooling.py,
// base/modules/dense.py, base/modules/normalize.py) over mha's text encoders;
// sentence_modules.cpp reads the directory.

#include <c10/util/Exception.h>
#include <mha/hf_models.h>
#include <mha/quantization.h>
#include <mha/sentence_transformer.h>

#include <algorithm>
#include <numeric>

#include "pipelines/batches.h"
#include "pipelines/sentence_modules.h"

namespace mha {

using torch::Tensor;

SentenceTransformer::SentenceTransformer(const std::string& directory,
                                         const HfModelLoadOptions& options)
    : tokenizer_(load_hf_tokenizer(detail::read_sentence_modules(directory).transformer)) {
  const detail::SentenceModules modules = detail::read_sentence_modules(directory);
  encoder_ = load_hf_model(modules.transformer, options).as<TextEncoderModel>();
  max_seq_length_ = modules.max_seq_length.value_or(
      tokenizer_.model_max_length().value_or(encoder_->options.max_position_embeddings()));
  pooling_ = modules.pooling;
  for (const detail::DenseModule& dense : modules.dense) {
    torch::nn::Linear linear(torch::nn::LinearOptions(dense.weight.size(1), dense.weight.size(0))
                                 .bias(dense.bias.defined()));
    torch::NoGradGuard no_grad;
    linear->weight.copy_(dense.weight);
    if (dense.bias.defined()) linear->bias.copy_(dense.bias);
    linear->eval();
    dense_.emplace_back(linear, dense.tanh);
  }
  normalize_ = modules.normalize;
}

int64_t SentenceTransformer::dimension() const {
  if (!dense_.empty()) return dense_.back().first->options.out_features();
  return encoder_->options.layer().d_model() * static_cast<int64_t>(pooling_.size());
}

namespace {

/// One pooling mode over `tokens` (N, L, E) where `mask` (N, L) is 1: (N, E).
Tensor pooled(SentencePooling mode, const Tensor& tokens, const Tensor& mask) {
  const Tensor m = mask.unsqueeze(-1).to(tokens.scalar_type());  // (N, L, 1)
  switch (mode) {
    case SentencePooling::kCls: {                           // the first attended token
      const Tensor first = mask.to(torch::kInt).argmax(1);  // (N)
      return tokens.gather(1, first.view({-1, 1, 1}).expand({-1, 1, tokens.size(2)})).squeeze(1);
    }
    case SentencePooling::kMax:
      return tokens.masked_fill(m.expand_as(tokens) == 0, -INFINITY).amax(1);
    case SentencePooling::kMean:
    case SentencePooling::kMeanSqrtLenTokens: {
      const Tensor sum = (tokens * m).sum(1);         // (N, E)
      const Tensor count = m.sum(1).clamp_min(1e-9);  // (N, 1)
      return sum / (mode == SentencePooling::kMean ? count : count.sqrt());
    }
    case SentencePooling::kWeightedMean: {  // positions 1, 2, ... (right padding)
      const Tensor weights =
          torch::arange(1, tokens.size(1) + 1, tokens.options()).view({1, -1, 1}) * m;  // (N, L, 1)
      return (tokens * weights).sum(1) / weights.sum(1).clamp_min(1e-9);
    }
    case SentencePooling::kLastToken: {
      const Tensor last = mask.sum(1).sub(1).clamp_min(0);  // (N) right padding
      return (tokens * m)
          .gather(1, last.view({-1, 1, 1}).expand({-1, 1, tokens.size(2)}))
          .squeeze(1);
    }
  }
  return Tensor();
}

}  // namespace

Tensor SentenceTransformer::sentence_vectors(const Tensor& tokens, const Tensor& mask) const {
  std::vector<Tensor> parts;
  for (const SentencePooling mode : pooling_) parts.push_back(pooled(mode, tokens, mask));
  Tensor x = torch::cat(parts, -1);  // (N, E * modes)
  for (const auto& [linear, tanh] : dense_) {
    x = mha::linear(linear, x);  // (N, out)
    if (tanh) x = x.tanh();
  }
  // F.normalize(x, p=2, dim=-1): x / max(|x|, 1e-12).
  return normalize_ ? x / x.norm(2, -1, /*keepdim=*/true).clamp_min(1e-12) : x;
}

Tensor SentenceTransformer::encode(const std::vector<std::string>& sentences,
                                   int64_t batch_size) const {
  EncodeOptions options;
  options.truncation(Truncation::kLongestFirst).max_length(max_seq_length_);
  std::vector<std::vector<int64_t>> ids = tokenizer_.encode_each(sentences, options);
  // Longest first (sentence-transformers sorts by length too): a batch's rows
  // are of like length, so little of it is padding.
  std::vector<int64_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return ids[a].size() > ids[b].size(); });
  std::vector<EncodedText> rows(ids.size());
  for (size_t i = 0; i < order.size(); ++i) rows[i].input_ids = std::move(ids[order[i]]);
  std::vector<Tensor> vectors;
  detail::for_each_batch(sentences.size(), batch_size, [&](size_t begin, size_t end) {
    const detail::PaddedBatch batch =
        detail::padded_batch(rows, begin, end, tokenizer_.pad_token_id().value_or(0));
    torch::NoGradGuard no_grad;
    TextEncoderModel encoder = encoder_;
    const Tensor tokens = encoder(batch.input_ids, batch.attention_mask).last_hidden_state;
    vectors.push_back(sentence_vectors(tokens, batch.attention_mask));  // (B, D)
  });
  if (vectors.empty()) return torch::zeros({0, dimension()});
  const Tensor sorted = torch::cat(vectors, 0);  // (N, D), longest first
  return torch::empty_like(sorted).index_copy_(0, torch::tensor(order, torch::kLong),
                                               sorted);  // (N, D)
}

}  // namespace mha
