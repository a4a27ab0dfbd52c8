#include "text/pipeline_parts.h"

#include <c10/util/Exception.h>

namespace mha {
namespace detail {

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
