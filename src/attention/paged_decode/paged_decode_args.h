#pragma once

// Private: the paged decode attention's operands as its kernels read them, and
// the kernels' entries, one per CPU capability object (paged_decode.h is the
// tensor interface). No LibTorch header, as linear/panel_gemm/panel_gemm_args.h.

#include <cstdint>

#include "common/cpu_capability.h"

namespace mha {
namespace detail {

/// A pool's layout, strides in elements: a block, a row in it, a head.
struct PoolStrides {
  int64_t block, row, head;
};

/// One call's operands as the kernels read them; elements of `dtype_bfloat16`
/// ? c10::BFloat16 : float.
struct PagedDecodeOperands {
  const void* query;           ///< (N, H, hd), rows query_stride apart
  const void* keys;            ///< (blocks, block_size, H, hd)
  const void* values;          ///< the same shape as keys, its own strides
  void* out;                   ///< (N, H, hd), contiguous
  const int32_t* block_table;  ///< (N, max_blocks), rows table_stride apart
  const int32_t* lengths;      ///< (N,)
  bool bfloat16, table_per_position;
  int64_t heads, dim, block_size, table_stride;
  int64_t query_stride[2];  ///< N, H strides
  PoolStrides key_strides, value_strides;
};

/// How a call's (sequence, head) pairs are split into items, each one
/// sequence and `heads` of its heads (`per_sequence` items per sequence).
struct DecodeItems {
  int64_t heads = 1, per_sequence = 1;
};

/// The kernels, one per capability object: items [begin, end) of `items`
/// into `operands.out`.
MHA_DECLARE_CAPABILITY_ENTRIES(paged_decode,
                               const PagedDecodeOperands& operands,
                               const DecodeItems& items,
                               int64_t begin,
                               int64_t end);

}  // namespace detail
}  // namespace mha
