#include "text/tokenizer_pipeline.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "text/decoders.h"
#include "text/word_piece.h"

namespace mha {
namespace detail {

void TokenizerPipeline::encode_words(const std::string& text,
                                     bool at_start,
                                     std::vector<int64_t>& ids) const {
  if (pre_tokenizer == nullptr) {
    model->tokenize(text, ids);
    return;
  }
  for (const TextPiece& word : pre_tokenizer->pre_tokenize({{text, at_start}}))
    model->tokenize(word.text, ids);
}

std::vector<int64_t> TokenizerPipeline::encode_plain(const std::string& text) const {
  std::vector<int64_t> ids;
  // tokenizers' AddedVocabulary: tokens that are not normalized are found in
  // the raw text, the others in the normalized text between those.
  for (const TextSegment& raw : added.split(text, /*normalized=*/false)) {
    if (raw.id) {
      ids.push_back(*raw.id);
      continue;
    }
    const std::string piece = text.substr(raw.begin, raw.end - raw.begin);
    const std::string normalized = normalizer ? normalizer->normalize(piece) : piece;
    for (const TextSegment& segment : added.split(normalized, /*normalized=*/true)) {
      if (segment.id) {
        ids.push_back(*segment.id);
      } else {
        encode_words(normalized.substr(segment.begin, segment.end - segment.begin),
                     raw.begin == 0 && segment.begin == 0, ids);
      }
    }
  }
  return ids;
}

int TokenizerPipeline::fallback_byte_of(int64_t id) const {
  std::vector<const Decoder*> parts;
  decoder->parts(parts);
  const bool joins_bytes = std::any_of(parts.begin(), parts.end(), [](const Decoder* d) {
    return dynamic_cast<const ByteFallbackDecoder*>(d) != nullptr;
  });
  const std::string* token = added.find(id) != nullptr ? nullptr : model->id_to_token(id);
  return joins_bytes && token != nullptr ? fallback_byte(*token) : -1;
}

std::string TokenizerPipeline::decode(const std::vector<int64_t>& ids,
                                      bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  for (size_t i = 0; i < ids.size(); ++i) {
    const AddedToken* added_token = added.find(ids[i]);
    if (added_token != nullptr) {
      if (!(skip_special_tokens && added_token->special)) tokens.push_back(added_token->content);
      continue;
    }
    const std::string* token = model->id_to_token(ids[i]);
    TORCH_CHECK_INDEX(token != nullptr, "decode: token id ", ids[i], " at index ", i,
                      " is outside the vocabulary: expected ids in [0, ", size(),
                      ") (transformers skips such ids silently)");
    tokens.push_back(*token);
  }
  const std::string text = decoder->decode(tokens);
  return clean_up_tokenization_spaces ? clean_up_tokenization(text, /*do_not=*/false) : text;
}

}  // namespace detail
}  // namespace mha
