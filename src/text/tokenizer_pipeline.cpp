#include "text/tokenizer_pipeline.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "text/decoders.h"
#include "text/word_piece.h"

namespace mha {
namespace detail {

void TokenizerPipeline::encode_words(const TextPiece& piece,
                                     std::vector<int64_t>& ids,
                                     Spans* offsets,
                                     std::vector<int64_t>* words,
                                     int64_t& word) const {
  const std::vector<TextPiece> pieces =
      pre_tokenizer != nullptr ? pre_tokenizer->pre_tokenize({piece}) : std::vector{piece};
  Spans spans;
  for (const TextPiece& text : pieces) {
    spans.clear();
    model->tokenize(text.text, ids, offsets != nullptr ? &spans : nullptr);
    if (offsets != nullptr) {
      for (const auto& [begin, end] : spans) {
        offsets->push_back(original_range(text.origin, begin, end));
        if (words != nullptr) words->push_back(word);
      }
    }
    ++word;
  }
}

std::vector<int64_t> TokenizerPipeline::encode_plain(const std::string& text,
                                                     Spans* offsets,
                                                     std::vector<int64_t>* words) const {
  std::vector<int64_t> ids;
  int64_t word = 0;  // tokenizers' word ids: the index of each piece
  const auto added_word = [&] {
    if (words != nullptr) words->push_back(word);
    ++word;
  };
  // tokenizers' AddedVocabulary: tokens that are not normalized are found in
  // the raw text, the others in the normalized text between those.
  for (const TextSegment& raw : added.split(text, /*normalized=*/false)) {
    if (raw.id) {
      ids.push_back(*raw.id);
      if (offsets != nullptr) offsets->emplace_back(raw.begin, raw.end);
      added_word();
      continue;
    }
    std::string normalized = text.substr(raw.begin, raw.end - raw.begin);
    Alignment origin;  // each normalized byte's bytes in `text`, where offsets are asked for
    if (offsets != nullptr) {
      origin = identity_alignment(normalized);
      for (auto& [begin, end] : origin) begin += raw.begin, end += raw.begin;
      if (normalizer) normalizer->normalize_aligned(normalized, origin);
    } else if (normalizer) {
      normalized = normalizer->normalize(normalized);
    }
    for (const TextSegment& segment : added.split(normalized, /*normalized=*/true)) {
      if (segment.id) {
        ids.push_back(*segment.id);
        if (offsets != nullptr) {
          offsets->push_back(original_range(origin, segment.begin, segment.end));
        }
        added_word();
        continue;
      }
      TextPiece piece{normalized.substr(segment.begin, segment.end - segment.begin),
                      raw.begin == 0 && segment.begin == 0,
                      {}};
      if (offsets != nullptr) {
        piece.origin.assign(origin.begin() + static_cast<std::ptrdiff_t>(segment.begin),
                            origin.begin() + static_cast<std::ptrdiff_t>(segment.end));
      }
      encode_words(piece, ids, offsets, words, word);
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
  std::string text = decode_uncleaned(ids, skip_special_tokens);
  return clean_up_tokenization_spaces ? clean_up_tokenization(std::move(text), /*do_not=*/false)
                                      : text;
}

std::string TokenizerPipeline::decode_uncleaned(const std::vector<int64_t>& ids,
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
  return decoder->decode(tokens);
}

}  // namespace detail
}  // namespace mha
