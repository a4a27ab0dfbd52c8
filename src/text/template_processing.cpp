#include "text/template_processing.h"

namespace mha {
namespace detail {

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

}  // namespace detail
}  // namespace mha
