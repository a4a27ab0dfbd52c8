#include "text/template_processing.h"

namespace mha {
namespace detail {

int64_t TemplateProcessing::added_tokens(bool pair) const {
  int64_t count = 0;
  for (const TemplatePiece& piece : pair ? this->pair : single) {
    count += static_cast<int64_t>(piece.ids.size());
  }
  return count;
}

std::vector<int64_t> TemplateProcessing::apply(const std::vector<int64_t>& a,
                                               const std::vector<int64_t>* b) const {
  std::vector<int64_t> out;
  for (const TemplatePiece& piece : b == nullptr ? single : pair) {
    const std::vector<int64_t>& ids = piece.kind == TemplatePiece::Kind::kSpecial     ? piece.ids
                                      : piece.kind == TemplatePiece::Kind::kSequenceA ? a
                                                                                      : *b;
    out.insert(out.end(), ids.begin(), ids.end());
  }
  return out;
}

std::vector<int64_t> TemplateProcessing::type_ids(size_t a_length,
                                                  std::optional<size_t> b_length,
                                                  bool specials) const {
  std::vector<int64_t> out;
  for (const TemplatePiece& piece : b_length ? pair : single) {
    const size_t count = piece.kind == TemplatePiece::Kind::kSpecial
                             ? (specials ? piece.ids.size() : 0)
                         : piece.kind == TemplatePiece::Kind::kSequenceA ? a_length
                                                                         : *b_length;
    out.insert(out.end(), count, piece.type_id);
  }
  return out;
}

}  // namespace detail
}  // namespace mha
