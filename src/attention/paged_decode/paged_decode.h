#pragma once

// Private: batched decode attention over cached keys and values in blocks.
// One call attends one query row of every sequence of a step over that
// sequence's cached keys and values, read in place through a block table (no
// gather), parallel over (sequence, head): a paged pool's blocks, or a
// KVCache's buffers (each sequence one block, `dense_blocks`). Compiled once
// per CPU capability (scalar, AVX2, AVX-512: paged_decode_<capability>.cpp,
// from paged_decode_kernel.h, on paged_decode_args.h's operands); the best one
// this CPU runs is chosen at run time.

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "attention/paged_decode/paged_decode_args.h"
#include "common/cpu_capability.h"

namespace mha {
namespace detail {

/// A step's decode attention. Pools and query share one dtype, float32 or
/// bfloat16; the reduction order of each (sequence, head) depends on nothing
/// but its own keys, so a sequence's result is the same in any batch.
struct PagedDecodeArgs {
  torch::Tensor query;        ///< (N, H, hd), the last dimension contiguous
  torch::Tensor keys;         ///< (blocks, block_size, H, hd), the last dimension contiguous
  torch::Tensor values;       ///< the same shape as `keys`, its own strides
  torch::Tensor block_table;  ///< (N, max_blocks) int32: each sequence's blocks in order
  torch::Tensor lengths;      ///< (N,) int32: the positions each sequence attends over
  /// Instead: block_table (N, S) holds, per position j, the block whose row j
  /// holds the sequence's position j (a KVCache's buffers after `reorder`).
  bool table_per_position = false;
};

/// `keys`, `values` (R, H, S, hd) buffers (a KVCache's views) as decode
/// arguments for `query` (N, H, hd): each buffer row one block of S
/// positions, all attended, sequence i reading row `rows[i]` (int32 (N,)),
/// its position j from row `rows[i][j]` (int32 (N, S)), or row i where
/// `rows` is undefined (R = N).
PagedDecodeArgs dense_blocks(const torch::Tensor& query,
                             const torch::Tensor& keys,
                             const torch::Tensor& values,
                             const torch::Tensor& rows = {});

/// softmax(q k^T / sqrt(hd)) v of each sequence's query over its first
/// `lengths[n]` positions; (N, H, hd) in the query's dtype. A sequence of
/// length 0 gets zeros. Throws (naming the argument) on inconsistent args.
torch::Tensor paged_decode_attention(const PagedDecodeArgs& args);
/// The same with the kernel compiled for `capability` (tests compare them);
/// throws unless this CPU runs it.
torch::Tensor paged_decode_attention(const PagedDecodeArgs& args, CpuCapability capability);

/// What the kernel that `capability` runs was compiled for (a test that the
/// objects kept their own bodies).
const char* paged_decode_compiled_for(CpuCapability capability);

}  // namespace detail
}  // namespace mha
