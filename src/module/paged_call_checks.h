#pragma once

// Private: the checks of MultiheadAttentionImpl::forward_paged, callable
// alone, so that a layer checks both of its attention calls, and a stack all
// of its layers' calls, before any cache changes.

#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cache/paged_block_manager.h"

namespace mha {

class MultiheadAttentionImpl;
class PagedKVCache;

namespace detail {

/// The arguments of one `forward_paged` call: the sequences' rows one after
/// another, their ids and offsets.
struct PagedCall {
  const torch::Tensor& query;  ///< (T, E)
  const torch::Tensor& key;    ///< (new key rows, kdim) or undefined
  const torch::Tensor& value;  ///< (new key rows, vdim) or undefined
  const std::vector<int64_t>& seq_ids;
  const torch::Tensor& cu_seqlens;     ///< the queries' offsets
  const torch::Tensor& cu_seqlens_kv;  ///< a static cache's key offsets, or undefined
};

/// `offsets` (the argument `name`): num_seqs + 1 offsets from 0 to `total`,
/// non-decreasing, int32 or int64; returned on the host.
std::vector<int64_t> checked_host_offsets(const torch::Tensor& offsets,
                                          const char* name,
                                          size_t num_seqs,
                                          int64_t total);
/// Throws what `module.forward_paged(call..., cache)` would throw before
/// changing anything; else returns the call's offsets on the host. Inside a
/// stack step on `cache`'s block table: the step's offsets and ids; outside:
/// `cu_seqlens` (and a static cache's `cu_seqlens_kv`) checked and copied,
/// the blocks' room, and no new positions when the table is shared
/// (a PagedStackCache's layers).
PagedOffsets check_paged_call(const MultiheadAttentionImpl& module,
                              PagedKVCache& cache,
                              const PagedCall& call);

/// Every check of one layer's call but the blocks' room and the shared-table
/// rule (a stack step checks the room once per table, PagedStackStep): the
/// module, the tensors, the ids (known, distinct), a static cache's
/// memories. Returns `known` when given (the stack's offsets, checked and
/// copied to the host once per step), else the offsets checked and copied.
PagedOffsets check_paged_layer(const MultiheadAttentionImpl& module,
                               PagedKVCache& cache,
                               const PagedCall& call,
                               const PagedOffsets* known = nullptr);

/// The offsets of a call that an outer entry has checked (`ValidatedScope`):
/// the stack step's in progress on `cache`'s table, else `cu_seqlens` (and a
/// static cache's `cu_seqlens_kv`) copied to the host.
PagedOffsets validated_paged_offsets(PagedKVCache& cache, const PagedCall& call);

}  // namespace detail
}  // namespace mha
