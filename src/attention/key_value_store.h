#pragma once

// Private: where a cached or paged call's keys and values are kept
// (docs/architecture.md, stage 5). The plan's run (`run_stored_plan`)
// gives the store the call's new keys and values, then asks it for what the
// kernels the plan chose read: keys and values, a row map, or a block table.
// A store attends to nothing. Its implementations are the module's front
// ends' (src/module/): a KVCache's, a PagedKVCache's.

#include <torch/types.h>

#include <cstddef>
#include <utility>

#include "attention/call_plan.h"

namespace mha {
namespace detail {

/// What a store gives back for the kernels to read.
struct StoredKeyValues {
  /// kDense: (N, H, S, hd), or (R, H, S, hd) read through `rows`; kPaged's
  /// `read`: the pool (blocks, block_size, H, hd); `read_sequence`: (1, H, S, hd).
  torch::Tensor keys;
  torch::Tensor values;  ///< the same layout as `keys`
  /// kDense for kDecode: query row i reads keys row rows[i] (int32 (N,), or
  /// (N, S) per position); undefined: row i.
  torch::Tensor rows;
  torch::Tensor block_table;  ///< kPaged: (N, max_blocks) int32, each sequence's blocks
  torch::Tensor lengths;      ///< kPaged: (N,) int32, each sequence's keys after the call

  /// Keys and values, read through `rows` where given.
  static StoredKeyValues of(torch::Tensor keys, torch::Tensor values, torch::Tensor rows = {}) {
    StoredKeyValues kv;
    kv.keys = std::move(keys);
    kv.values = std::move(values);
    kv.rows = std::move(rows);
    return kv;
  }
};

/// The keys and values of a cached or paged call.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  /// Stores the call's new keys and values `k`, `v` (kDense: (N, H, L, hd);
  /// kPaged: (T, H, hd) rows; undefined: none, a filled static cache).
  virtual void write(const torch::Tensor& k, const torch::Tensor& v) = 0;
  /// All it holds, in the form `kernel` reads: kDense: the keys and values
  /// (with the row map only for kDecode, which reads through it in place);
  /// kPaged (kDecode): the pools with the block table and lengths.
  virtual StoredKeyValues read(AttentionKernel kernel) = 0;
  /// kPaged: the keys and values of the call's sequence `index` (call order),
  /// gathered from the blocks, (1, H, S, hd).
  virtual StoredKeyValues read_sequence(size_t index) = 0;
};

}  // namespace detail
}  // namespace mha
