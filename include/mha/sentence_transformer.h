#pragma once

// Sentence embeddings from a sentence-transformers directory, as
// sentence-transformers' `SentenceTransformer(dir).encode(sentences)` makes
// them: modules.json's modules in order (the Transformer: a text encoder
// `load_hf_model` reads, with its tokenizer; Pooling; Dense; Normalize), in
// the format the package writes today and in the published one.

#include <mha/hf_encoder_models.h>
#include <mha/hf_models.h>
#include <mha/tokenizer.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mha {

/// How token vectors become one sentence vector (sentence-transformers'
/// `Pooling` modes; several are concatenated in order).
enum class SentencePooling {
  kCls,                ///< the first token's
  kMax,                ///< each dimension's largest over the tokens
  kMean,               ///< the tokens' mean
  kMeanSqrtLenTokens,  ///< the tokens' sum over the square root of their number
  kWeightedMean,       ///< the tokens' mean weighted by position (1, 2, ...)
  kLastToken,          ///< the last token's
};

/// A sentence-transformers model: `encode` gives each sentence's vector.
/// Const and thread-safe for encoding.
///
/// Example:
/// ```
/// mha::SentenceTransformer model("path/to/all-MiniLM-L6-v2");
/// torch::Tensor vectors = model.encode({"A cat sits.", "A dog runs."});  // (2, 384)
/// torch::Tensor similarity = torch::mm(vectors, vectors.t());  // cosine (normalized)
/// ```
class SentenceTransformer {
 public:
  /// Reads `directory`'s modules.json and each module's files. Throws
  /// `c10::Error` naming the file for a module it does not run (listing the
  /// supported ones), a pooling mode or an activation it does not know.
  /// The Transformer module is loaded with `options` (`load_hf_model`'s:
  /// prepacked by default).
  explicit SentenceTransformer(const std::string& directory,
                               const HfModelLoadOptions& options = {});

  /// Each sentence's vector, (N, D) float32, in the sentences' order:
  /// tokenized (truncated to `max_seq_length`), encoded longest first in
  /// padded batches of `batch_size` (sentences of like length together, as
  /// sentence-transformers sorts them, so that little is padding), then the
  /// modules after the Transformer.
  torch::Tensor encode(const std::vector<std::string>& sentences, int64_t batch_size = 32) const;

  /// The longest input in tokens (sentence_bert_config.json's
  /// `max_seq_length`, else the tokenizer's `model_max_length`, else the
  /// model's position table).
  int64_t max_seq_length() const { return max_seq_length_; }
  /// The pooling modes, in order.
  const std::vector<SentencePooling>& pooling() const { return pooling_; }
  /// Whether the vectors are normalized (a `Normalize` module).
  bool normalized() const { return normalize_; }
  /// The vectors' width.
  int64_t dimension() const;

 private:
  /// The pooled, projected and normalized vectors of one padded batch.
  torch::Tensor sentence_vectors(const torch::Tensor& tokens, const torch::Tensor& mask) const;

  Tokenizer tokenizer_;
  TextEncoderModel encoder_{nullptr};
  int64_t max_seq_length_ = 0;
  std::vector<SentencePooling> pooling_;
  /// The Dense modules in order, each with its activation (true: tanh, false: identity).
  std::vector<std::pair<torch::nn::Linear, bool>> dense_;
  bool normalize_ = false;
};

}  // namespace mha
