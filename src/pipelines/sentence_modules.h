#pragma once

// Private: a sentence-transformers directory's modules (modules.json and
// each module's files), in the format sentence-transformers 6.3 writes and
// in the published one (`pooling_mode_*` booleans, `word_embedding_dimension`,
// `sentence_transformers.models.*` types, sentence_bert_config.json's
// `max_seq_length`).

#include <mha/sentence_transformer.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mha {
namespace detail {

/// A `Dense` module: (out, in) weight, (out) bias or undefined, and its activation.
struct DenseModule {
  torch::Tensor weight;
  torch::Tensor bias;
  bool tanh = false;  ///< Tanh, else Identity
};

/// What `SentenceTransformer` runs, in order.
struct SentenceModules {
  std::string transformer;                ///< the Transformer module's directory
  std::optional<int64_t> max_seq_length;  ///< sentence_bert_config.json's, if it says
  std::vector<SentencePooling> pooling;   ///< the Pooling module's modes (mean without one)
  std::vector<DenseModule> dense;
  bool normalize = false;
};

/// Reads `directory`'s modules; without modules.json, a Transformer and mean
/// pooling, as sentence-transformers makes of a plain model directory.
/// Throws `c10::Error` naming the file for a module, mode or activation it
/// does not run (listing the supported ones).
SentenceModules read_sentence_modules(const std::string& directory);

}  // namespace detail
}  // namespace mha
