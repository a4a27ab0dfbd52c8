#include "text/sentencepiece_model.h"

#include <c10/util/Exception.h>
#include <sentencepiece_processor.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/utf8.h"

namespace mha {
namespace detail {

namespace {

using nlohmann::json;

/// `piece`'s code point boundaries after the first and before its end.
std::vector<size_t> inner_boundaries(const std::string& piece) {
  std::vector<size_t> out;
  size_t length = 0;
  for (size_t at = 0; at < piece.size(); at += length) {
    code_point_at(piece, at, length);
    if (at > 0) out.push_back(at);
  }
  return out;
}

/// `generate_merges(vocab)` without scores: for each piece in id order, each
/// split of it into two pieces of the vocabulary, left halves shortest
/// first (its sort by merged piece's id, then the halves' lengths).
json generated_merges(const std::vector<std::string>& pieces,
                      const std::unordered_map<std::string, int64_t>& vocab) {
  json merges = json::array();
  for (const std::string& piece : pieces) {
    for (const size_t at : inner_boundaries(piece)) {
      std::string left = piece.substr(0, at), right = piece.substr(at);
      if (vocab.count(left) != 0 && vocab.count(right) != 0) {
        merges.push_back(json::array({std::move(left), std::move(right)}));
      }
    }
  }
  return merges;
}

/// A protobuf varint at `at` of `bytes` (moved past it).
uint64_t varint(const std::string& bytes, size_t& at) {
  uint64_t value = 0;
  bool complete = false;
  for (int shift = 0; !complete && at < bytes.size() && shift < 64; shift += 7) {
    const auto byte = static_cast<uint8_t>(bytes[at++]);
    value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    complete = byte < 0x80;
  }
  TORCH_CHECK_VALUE(complete, "load_hf_tokenizer: a SentencePiece model's varint is cut short");
  return value;
}

/// Each piece's type (sentencepiece_model.proto: ModelProto field 1, the
/// pieces; SentencePiece field 3, the type, NORMAL = 1 by default), read
/// from the library's serialized model: this library version has no
/// accessor for user-defined pieces.
std::vector<int> piece_types(const std::string& model) {
  std::vector<int> types;
  for (size_t at = 0; at < model.size();) {
    const uint64_t key = varint(model, at);
    const uint64_t wire = key & 7;
    if (wire == 0) {
      varint(model, at);
      continue;
    }
    TORCH_CHECK_VALUE(wire == 1 || wire == 2 || wire == 5,
                      "load_hf_tokenizer: a SentencePiece model has a field of wire type ", wire);
    const size_t length = wire == 2 ? static_cast<size_t>(varint(model, at)) : wire == 1 ? 8 : 4;
    TORCH_CHECK_VALUE(at + length <= model.size(),
                      "load_hf_tokenizer: a SentencePiece model's field is cut short");
    if ((key >> 3) == 1 && wire == 2) {  // a SentencePiece: its field 3
      int type = 1;
      const std::string piece = model.substr(at, length);
      for (size_t p = 0; p < piece.size();) {
        const uint64_t field = varint(piece, p);
        if ((field & 7) == 0) {
          const uint64_t value = varint(piece, p);
          if ((field >> 3) == 3) type = static_cast<int>(value);
        } else if ((field & 7) == 2) {
          p += static_cast<size_t>(varint(piece, p));
        } else {
          p += (field & 7) == 1 ? 8 : 4;
        }
      }
      types.push_back(type);
    }
    at += length;
  }
  return types;
}

}  // namespace

json bpe_tokenizer_json_of_sentencepiece(const std::filesystem::path& path) {
  sentencepiece::SentencePieceProcessor processor;
  const auto status = processor.Load(path.string());
  TORCH_CHECK_VALUE(status.ok(), "load_hf_tokenizer: ", path.string(),
                    " is not a SentencePiece model: ", status.ToString());
  const int size = processor.GetPieceSize();
  const std::vector<int> types = piece_types(processor.serialized_model_proto());
  TORCH_CHECK_VALUE(static_cast<int>(types.size()) == size, "load_hf_tokenizer: ", path.string(),
                    ": expected ", size, " piece types, but read ", types.size());
  constexpr int kControl = 3, kUserDefined = 4;
  std::vector<std::string> pieces;
  std::unordered_map<std::string, int64_t> vocab;
  json vocab_json = json::object(), added = json::array();
  for (int id = 0; id < size; ++id) {
    pieces.push_back(processor.IdToPiece(id));
    vocab[pieces.back()] = id;
    vocab_json[pieces.back()] = id;
    // Control pieces (<s>, </s>) are special added tokens, user-defined ones plain added tokens.
    if (types[id] == kControl || types[id] == kUserDefined) {
      added.push_back({{"id", id},
                       {"content", pieces.back()},
                       {"special", types[id] == kControl},
                       {"normalized", false}});
    }
  }
  return {{"model",
           {{"type", "BPE"}, {"vocab", vocab_json}, {"merges", generated_merges(pieces, vocab)}}},
          {"added_tokens", added}};
}

}  // namespace detail
}  // namespace mha
