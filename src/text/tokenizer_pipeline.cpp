#include "text/tokenizer_pipeline.h"

#include <c10/util/Exception.h>

namespace mha {
namespace detail {

std::vector<int64_t> TokenizerPipeline::encode_plain(const std::string& text) const {
  std::vector<int64_t> ids;
  for (const TextSegment& segment : added.split(text)) {
    if (segment.id) {
      ids.push_back(*segment.id);
      continue;
    }
    const std::string piece = text.substr(segment.begin, segment.end - segment.begin);
    if (pre_tokenizer) {
      for (const std::string& word : pre_tokenizer->pre_tokenize(piece)) model.tokenize(word, ids);
    } else {
      model.tokenize(piece, ids);
    }
  }
  return ids;
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
    const std::string* token = model.id_to_token(ids[i]);
    TORCH_CHECK_INDEX(token != nullptr, "decode: token id ", ids[i], " at index ", i,
                      " is outside the vocabulary: expected ids in [0, ", size(),
                      ") (transformers skips such ids silently)");
    tokens.push_back(*token);
  }
  if (byte_level_decoder) return ByteLevel::decode(tokens);
  std::string text;
  for (size_t i = 0; i < tokens.size(); ++i) text += (i > 0 ? " " : "") + tokens[i];
  return text;
}

}  // namespace detail
}  // namespace mha
