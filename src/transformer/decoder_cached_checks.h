#pragma once

// Private: the checks of a cached decoder-layer step
// (TransformerDecoderLayerImpl::forward_cached), all run before any cache
// changes. A decoder runs them once with its first layer's caches: every
// layer's caches hold the same positions and batch, so the later layers'
// calls cannot fail halfway through the stack.

#include <torch/types.h>

#include "mha/transformer_layers.h"
#include "transformer/input_checks.h"

namespace mha {
namespace detail {

/// Eval mode; `tgt` and `memory` (shape, d_model, dtype and device, batch);
/// `memory` present on the first call and of the cached length afterwards;
/// the batch against the cache's; the padding masks' shapes (N, t0 + L) and
/// (N, S) and dtypes. Throws `c10::Error` naming the argument.
/// `inputs`' attention masks must be undefined (a cached step has none).
void check_cached_step(const TransformerDecoderLayerImpl& layer,
                       const TransformerDecoderLayerCache& cache,
                       const DecoderInputs& inputs);

/// The checks of the layer's two attention calls of a cached step
/// (`check_cached_attention`: the caches' kind, module, dtype and device,
/// sizes and capacity), before either writes its cache: the self-attention
/// over `tgt`, the cross-attention over `memory` on the first step (later
/// steps read the memory the cache holds).
void check_cached_attentions(const TransformerDecoderLayerImpl& layer,
                             TransformerDecoderLayerCache& cache,
                             const DecoderInputs& inputs);

}  // namespace detail
}  // namespace mha
