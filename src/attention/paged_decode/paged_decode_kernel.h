#pragma once

// Private: the body of the paged decode kernel, included once by each
// capability's object (paged_decode_<capability>.cpp), which is compiled with
// that capability's flags and CPU_CAPABILITY macros, so ATen's Vectorized<float>
// is that width there. Per (sequence, head): scores q.k over the sequence's
// positions in order, their max, exp and sum, then the weighted sum of the
// values in position order; one thread does all of it. Everything here is in
// the inline namespace CPU_CAPABILITY (common/capability_vec.h says why).

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/macros/Macros.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention/paged_decode/paged_decode_args.h"
#include "common/capability_vec.h"
#include "common/cpu_capability.h"

namespace mha {
namespace detail {
namespace paged_decode_kernel {
inline namespace CPU_CAPABILITY {

/// `count` elements of `src` as float into `dst`.
inline void to_float(const float* src, float* dst, int64_t count) {
  std::copy(src, src + count, dst);
}
inline void to_float(const c10::BFloat16* src, float* dst, int64_t count) {
  for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(src[i]);
}

/// `count` floats of `src` into `dst` in the pool's dtype.
inline void from_float(const float* src, float* dst, int64_t count) {
  std::copy(src, src + count, dst);
}
inline void from_float(const float* src, c10::BFloat16* dst, int64_t count) {
  for (int64_t i = 0; i < count; ++i) dst[i] = c10::BFloat16(src[i]);
}

/// q . k over `dim` floats, one accumulator in order; `kVecs` > 0: dim is
/// kVecs vectors, known when compiled, so the loop unrolls (same sum).
template <int kVecs>
float dot_floats(const float* q, const float* k, int64_t dim) {
  const int64_t vecs = kVecs > 0 ? kVecs : dim / Vec::size();
  Vec acc(0.0f);
  for (int64_t v = 0; v < vecs; ++v) {
    acc = at::vec::fmadd(Vec::loadu(q + v * Vec::size()), Vec::loadu(k + v * Vec::size()), acc);
  }
  float sum = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, acc);
  if constexpr (kVecs == 0) {
    for (int64_t d = vecs * Vec::size(); d < dim; ++d) sum += q[d] * k[d];
  }
  return sum;
}

/// q . k over `dim` floats (k converted to float first when it is bfloat16).
template <int kVecs, typename T>
float dot(const float* q, const T* k, float* k_float, int64_t dim) {
  if constexpr (std::is_same_v<T, float>) {
    return dot_floats<kVecs>(q, k, dim);
  } else {
    to_float(k, k_float, dim);
    return dot_floats<kVecs>(q, k_float, dim);
  }
}

/// acc += w * v over `dim` floats (`kVecs` as in dot_floats).
template <int kVecs>
void add_scaled_floats(float* acc, float w, const float* v, int64_t dim) {
  const int64_t vecs = kVecs > 0 ? kVecs : dim / Vec::size();
  const Vec wv(w);
  for (int64_t i = 0; i < vecs; ++i) {
    float* a = acc + i * Vec::size();
    at::vec::fmadd(wv, Vec::loadu(v + i * Vec::size()), Vec::loadu(a)).store(a);
  }
  if constexpr (kVecs == 0) {
    for (int64_t d = vecs * Vec::size(); d < dim; ++d) acc[d] += w * v[d];
  }
}

/// acc += w * v over `dim` floats (v converted to float first when it is bfloat16).
template <int kVecs, typename T>
void add_scaled(float* acc, float w, const T* v, float* v_float, int64_t dim) {
  if constexpr (std::is_same_v<T, float>) {
    add_scaled_floats<kVecs>(acc, w, v, dim);
  } else {
    to_float(v, v_float, dim);
    add_scaled_floats<kVecs>(acc, w, v_float, dim);
  }
}

/// The largest of `count` > 0 scores (NaN if any is NaN; the softmax is NaN then either way).
inline float max_of(const float* scores, int64_t count) {
  return at::vec::reduce_all<float>([](Vec& a, Vec& b) { return at::vec::maximum(a, b); }, scores,
                                    count);
}

/// Per-thread buffers for a group of up to `heads` heads of one sequence:
/// their scores (heads x positions), per head a query and an accumulator of
/// `dim` floats and its softmax's 1 / sum; one converted row of `dim` floats.
struct Scratch {
  std::vector<float> scores, q, acc, inv_sum, row;
  int64_t max_length;
  Scratch(int64_t heads, int64_t max_length, int64_t dim)
      : scores(heads * std::max<int64_t>(max_length, 1)),
        q(heads * dim),
        acc(heads * dim),
        inv_sum(heads),
        row(dim),
        max_length(std::max<int64_t>(max_length, 1)) {}
};

/// The heads [h0, h0 + g) of a pool row: each head's `dim` elements.
struct HeadSpan {
  int64_t h0, g, dim, head_stride;
};

/// Asks the CPU to start loading a row's heads (a pool row is a few pages
/// apart from the previous block's, where the hardware prefetcher stops).
template <typename T>
void prefetch_row(const T* row, const HeadSpan& heads) {
  constexpr int64_t kLine = 64 / sizeof(T);  // elements per cache line
  if (heads.head_stride == heads.dim) {      // the heads one span: (g * dim)
    const T* first = row + heads.h0 * heads.dim;
    for (int64_t e = 0; e < heads.g * heads.dim; e += kLine) __builtin_prefetch(first + e);
    return;
  }
  for (int64_t i = 0; i < heads.g; ++i) {
    const T* head = row + (heads.h0 + i) * heads.head_stride;
    for (int64_t d = 0; d < heads.dim; d += kLine) __builtin_prefetch(head + d);
  }
}

/// Positions prefetched ahead of the one read.
constexpr int64_t kAhead = 4;

/// `for_each_row` of a table per position: position j is row j of block table[j].
template <typename T, typename Visit>
void for_each_positioned_row(const T* pool,
                             const PoolStrides& strides,
                             const int32_t* table,
                             int64_t length,
                             const HeadSpan& heads,
                             const Visit& visit) {
  auto row_at = [&](int64_t j) {
    return pool + static_cast<int64_t>(table[j]) * strides.block + j * strides.row;
  };
  for (int64_t j = 0; j < std::min(kAhead, length); ++j) prefetch_row(row_at(j), heads);
  for (int64_t j = 0; j < length; ++j) {
    if (j + kAhead < length) prefetch_row(row_at(j + kAhead), heads);
    visit(j, row_at(j));
  }
}

/// Calls visit(j, row) for positions j = 0 .. length - 1 in order, `row`
/// pointing at position j's row of `pool` (the table's blocks in order):
/// block by block, so rows of a block are read one after the other, each
/// row's heads prefetched `kAhead` positions before they are read.
template <typename T, typename Visit>
void for_each_row(const T* pool,
                  const PoolStrides& strides,
                  const int32_t* table,
                  int64_t block_size,
                  int64_t length,
                  const HeadSpan& heads,
                  const Visit& visit) {
  auto row_at = [&](int64_t j) {
    return pool + static_cast<int64_t>(table[j / block_size]) * strides.block +
           (j % block_size) * strides.row;
  };
  for (int64_t j = 0; j < std::min(kAhead, length); ++j) prefetch_row(row_at(j), heads);
  for (int64_t b = 0, j = 0; j < length; ++b) {
    const T* block = pool + static_cast<int64_t>(table[b]) * strides.block;
    for (int64_t r = 0; r < block_size && j < length; ++r, ++j) {
      if (j + kAhead < length) {
        prefetch_row(
            r + kAhead < block_size ? block + (r + kAhead) * strides.row : row_at(j + kAhead),
            heads);
      }
      visit(j, block + r * strides.row);
    }
  }
}

/// `for_each_row` or `for_each_positioned_row`, as the call's table is.
template <typename T, typename Visit>
void read_rows(const PagedDecodeOperands& a,
               const T* pool,
               const PoolStrides& strides,
               const int32_t* table,
               int64_t length,
               const HeadSpan& heads,
               const Visit& visit) {
  if (a.table_per_position) {
    for_each_positioned_row(pool, strides, table, length, heads, visit);
  } else {
    for_each_row(pool, strides, table, a.block_size, length, heads, visit);
  }
}

/// Heads [h0, h0 + g) of sequence n: writes their attention rows (g, hd)
/// into `out`. Each head's scores, softmax and weighted sum run in position
/// order, whatever the group, so a head's result depends on its own keys only.
template <int kVecs, typename T>
void attend_group(
    const PagedDecodeOperands& a, int64_t n, int64_t h0, int64_t g, Scratch& s, T* out) {
  const int64_t dim = a.dim, length = a.lengths[n];
  const int32_t* table = a.block_table + n * a.table_stride;
  const PoolStrides &k_strides = a.key_strides, &v_strides = a.value_strides;
  const T* query = static_cast<const T*>(a.query);  // (N, H, hd)
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  for (int64_t i = 0; i < g; ++i) {  // the group's queries, scaled: (g, hd)
    float* q = s.q.data() + i * dim;
    to_float(query + n * a.query_stride[0] + (h0 + i) * a.query_stride[1], q, dim);
    for (int64_t d = 0; d < dim; ++d) q[d] *= scale;
  }
  float* scores = s.scores.data();  // (g, length), head i's at i * max_length
  read_rows(a, static_cast<const T*>(a.keys), k_strides, table, length,
            HeadSpan{h0, g, dim, k_strides.head}, [&](int64_t j, const T* row) {
              for (int64_t i = 0; i < g; ++i) {
                scores[i * s.max_length + j] = dot<kVecs>(
                    s.q.data() + i * dim, row + (h0 + i) * k_strides.head, s.row.data(), dim);
              }
            });
  for (int64_t i = 0; i < g; ++i) {
    float* head_scores = scores + i * s.max_length;
    if (length == 0) {
      s.inv_sum[i] = 0.0f;
      continue;
    }
    s.inv_sum[i] =
        1.0f / exp_and_sum</*kFastExp=*/false>(head_scores, length, max_of(head_scores, length));
  }
  std::fill(s.acc.begin(), s.acc.begin() + g * dim, 0.0f);
  read_rows(a, static_cast<const T*>(a.values), v_strides, table, length,
            HeadSpan{h0, g, dim, v_strides.head},
            [&](int64_t j, const T* row) {  // (hd,) += p_j * v_j per head
              for (int64_t i = 0; i < g; ++i) {
                add_scaled<kVecs>(s.acc.data() + i * dim, scores[i * s.max_length + j],
                                  row + (h0 + i) * v_strides.head, s.row.data(), dim);
              }
            });
  for (int64_t i = 0; i < g; ++i) {
    float* acc = s.acc.data() + i * dim;
    for (int64_t d = 0; d < dim; ++d) acc[d] *= s.inv_sum[i];
    from_float(acc, out + i * dim, dim);
  }
}

/// attend_group with the head dimension as a count of vectors known when
/// compiled where it is 1, 2, 4 or 8 of them (unrolled loops), else counted at run time.
template <typename T>
void attend_group_of_dim(
    const PagedDecodeOperands& a, int64_t n, int64_t h0, int64_t g, Scratch& s, T* out) {
  const int64_t dim = a.dim;
  switch (dim % Vec::size() == 0 ? dim / Vec::size() : 0) {
    case 1:
      return attend_group<1>(a, n, h0, g, s, out);
    case 2:
      return attend_group<2>(a, n, h0, g, s, out);
    case 4:
      return attend_group<4>(a, n, h0, g, s, out);
    case 8:
      return attend_group<8>(a, n, h0, g, s, out);
    default:
      return attend_group<0>(a, n, h0, g, s, out);
  }
}

/// Items [begin, end) of `items` (a sequence and a group of its heads each).
template <typename T>
void attend_items(const PagedDecodeOperands& a,
                  const DecodeItems& items,
                  int64_t begin,
                  int64_t end) {
  const int64_t heads = a.heads, dim = a.dim;
  int64_t max_length = 1;
  for (int64_t i = begin; i < end; ++i) {
    max_length = std::max<int64_t>(max_length, a.lengths[i / items.per_sequence]);
  }
  Scratch scratch(items.heads, max_length, dim);
  T* out_data = static_cast<T*>(a.out);  // (N, H, hd)
  for (int64_t i = begin; i < end; ++i) {
    const int64_t n = i / items.per_sequence, h0 = (i % items.per_sequence) * items.heads;
    const int64_t g = std::min(items.heads, heads - h0);
    attend_group_of_dim<T>(a, n, h0, g, scratch, out_data + (n * heads + h0) * dim);
  }
}

/// The kernel of the including object's capability: float32 or bfloat16.
inline void run(const PagedDecodeOperands& a,
                const DecodeItems& items,
                int64_t begin,
                int64_t end) {
  if (a.bfloat16) {
    attend_items<c10::BFloat16>(a, items, begin, end);
  } else {
    attend_items<float>(a, items, begin, end);
  }
}

}  // namespace CPU_CAPABILITY
}  // namespace paged_decode_kernel
}  // namespace detail
}  // namespace mha

/// Defines the kernel entry `name` and `name`_compiled_for in the including
/// capability object.
#define MHA_DEFINE_PAGED_DECODE_KERNEL(name)                                                       \
  MHA_DEFINE_CAPABILITY_ENTRY(                                                                     \
      name, paged_decode_kernel,                                                                   \
      (const PagedDecodeOperands& operands, const DecodeItems& items, int64_t begin, int64_t end), \
      (operands, items, begin, end))
