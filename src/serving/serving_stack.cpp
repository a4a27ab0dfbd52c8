// detail::ServingStack: what both kinds of ContinuousBatch stack share.

#include "serving/serving_stack.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "attention/projector.h"
#include "common/shape_format.h"

namespace mha {
namespace detail {

void check_serving_rows(const torch::Tensor& x,
                        const std::string& name,
                        const MultiheadAttentionImpl& attn) {
  const torch::Tensor& param = Projector::first_weight(attn);
  const int64_t embed_dim = attn.options.embed_dim();
  TORCH_CHECK_VALUE(x.defined() && x.dim() == 2 && x.size(1) == embed_dim,
                    fmt::format("expected {} of shape (rows, {}), but got {}", name, embed_dim,
                                x.defined() ? torch_size(x.sizes()) : "an undefined tensor"));
  TORCH_CHECK_TYPE(x.scalar_type() == param.scalar_type() && x.device() == param.device(),
                   fmt::format("expected {} of dtype {} on {} (the decoder's), but got {} on {}",
                               name, c10::toString(param.scalar_type()), param.device().str(),
                               c10::toString(x.scalar_type()), x.device().str()));
}

}  // namespace detail
}  // namespace mha
