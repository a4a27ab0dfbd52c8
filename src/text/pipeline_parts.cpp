#include "text/pipeline_parts.h"

#include <c10/util/Exception.h>

namespace mha {
namespace detail {

std::vector<TextPiece> PreTokenizer::pre_tokenize(const std::vector<TextPiece>& pieces) const {
  std::vector<TextPiece> split_pieces, kept;
  for (const TextPiece& piece : pieces) split(piece, split_pieces);
  for (TextPiece& piece : split_pieces) {
    if (!piece.text.empty()) kept.push_back(std::move(piece));
  }
  return kept;
}

void append_ranges(const TextPiece& piece,
                   const std::vector<std::pair<size_t, size_t>>& ranges,
                   std::vector<TextPiece>& out) {
  for (const auto& [begin, end] : ranges) {
    out.push_back({piece.text.substr(begin, end - begin), piece.at_start && begin == 0, {}});
    if (!piece.origin.empty()) {
      out.back().origin.assign(piece.origin.begin() + static_cast<std::ptrdiff_t>(begin),
                               piece.origin.begin() + static_cast<std::ptrdiff_t>(end));
    }
  }
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  std::string text;
  for (const std::string& token : decode_chain(std::move(tokens))) text += token;
  return text;
}

Vocabulary::Vocabulary(std::unordered_map<std::string, int64_t> ids) : ids_(std::move(ids)) {
  for (const auto& [token, id] : ids_) {
    TORCH_CHECK_VALUE(id >= 0 && id < (int64_t{1} << 31), "vocabulary id ", id, " of token '",
                      token, "' is out of range");
    if (id >= size()) tokens_.resize(id + 1);
    tokens_[id] = token;
  }
}

}  // namespace detail
}  // namespace mha
