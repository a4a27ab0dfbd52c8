#pragma once

// Private: the body of the paged decode kernel, included once by each
// capability's object (paged_decode_<capability>.cpp), which is compiled with
// that capability's flags and CPU_CAPABILITY macros, so ATen's Vectorized<float>
// is that width there. Per (sequence, head): scores q.k over the sequence's
// positions in order, their max, exp and sum, then the weighted sum of the
// values in position order; one thread does all of it.

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention/paged_decode/paged_decode.h"

namespace mha {
namespace detail {
namespace paged_decode_kernel {

using Vec = at::vec::Vectorized<float>;

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

/// q . k over `dim` floats (k converted to float first when it is bfloat16).
template <typename T>
float dot(const float* q, const T* k, float* k_float, int64_t dim) {
  const float* kf = k_float;
  if constexpr (std::is_same_v<T, float>) {
    kf = k;
  } else {
    to_float(k, k_float, dim);
  }
  Vec acc(0.0f);
  int64_t d = 0;
  for (; d + Vec::size() <= dim; d += Vec::size()) {
    acc = at::vec::fmadd(Vec::loadu(q + d), Vec::loadu(kf + d), acc);
  }
  float sum = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, acc);
  for (; d < dim; ++d) sum += q[d] * kf[d];
  return sum;
}

/// acc += w * v over `dim` floats.
template <typename T>
void add_scaled(float* acc, float w, const T* v, float* v_float, int64_t dim) {
  const float* vf = v_float;
  if constexpr (std::is_same_v<T, float>) {
    vf = v;
  } else {
    to_float(v, v_float, dim);
  }
  const Vec wv(w);
  int64_t d = 0;
  for (; d + Vec::size() <= dim; d += Vec::size()) {
    at::vec::fmadd(wv, Vec::loadu(vf + d), Vec::loadu(acc + d)).store(acc + d);
  }
  for (; d < dim; ++d) acc[d] += w * vf[d];
}

/// exp(x - max) in place over `count` scores; returns their sum.
inline float exp_and_sum(float* scores, int64_t count, float max) {
  const Vec max_v(max);
  Vec sum_v(0.0f);
  int64_t j = 0;
  for (; j + Vec::size() <= count; j += Vec::size()) {
    const Vec e = (Vec::loadu(scores + j) - max_v).exp();
    e.store(scores + j);
    sum_v = sum_v + e;
  }
  float sum = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, sum_v);
  for (; j < count; ++j) {
    scores[j] = std::exp(scores[j] - max);
    sum += scores[j];
  }
  return sum;
}

/// Per-thread buffers: the scores of one (sequence, head), and a query,
/// accumulator and converted row of `dim` floats each.
struct Scratch {
  std::vector<float> scores, q, acc, row;
  Scratch(int64_t max_length, int64_t dim)
      : scores(std::max<int64_t>(max_length, 1)), q(dim), acc(dim), row(dim) {}
};

/// Where position j of a sequence's head h lies in a pool of blocks: its
/// block from the table, then the row in the block and the head (elements).
struct BlockAddress {
  const int32_t* table;
  int64_t block_size, block_stride, row_stride, head_offset;
  int64_t operator()(int64_t j) const {
    return static_cast<int64_t>(table[j / block_size]) * block_stride +
           (j % block_size) * row_stride + head_offset;
  }
};

/// One (sequence, head): writes its attention row (hd) into `out`.
template <typename T>
void attend_one(const PagedDecodeArgs& a, int64_t n, int64_t h, Scratch& s, T* out) {
  const int64_t dim = a.query.size(2);
  const int64_t length = a.lengths.data_ptr<int32_t>()[n];
  const int32_t* table = a.block_table.data_ptr<int32_t>() + n * a.block_table.stride(0);
  const BlockAddress key_at{table, a.keys.size(1), a.keys.stride(0), a.keys.stride(1),
                            h * a.keys.stride(2)};
  const BlockAddress value_at{table, a.values.size(1), a.values.stride(0), a.values.stride(1),
                              h * a.values.stride(2)};
  const T* keys = a.keys.data_ptr<T>();
  const T* values = a.values.data_ptr<T>();
  const T* q = a.query.data_ptr<T>() + n * a.query.stride(0) + h * a.query.stride(1);
  to_float(q, s.q.data(), dim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  for (int64_t d = 0; d < dim; ++d) s.q[d] *= scale;
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < length; ++j) {  // scores (S,)
    s.scores[j] = dot(s.q.data(), keys + key_at(j), s.row.data(), dim);
    max = std::max(max, s.scores[j]);
  }
  const float sum = exp_and_sum(s.scores.data(), length, max);
  std::fill(s.acc.begin(), s.acc.end(), 0.0f);
  for (int64_t j = 0; j < length; ++j) {  // (hd,) += p_j * v_j
    add_scaled(s.acc.data(), s.scores[j], values + value_at(j), s.row.data(), dim);
  }
  const float inv = length > 0 ? 1.0f / sum : 0.0f;
  for (int64_t d = 0; d < dim; ++d) s.acc[d] *= inv;
  from_float(s.acc.data(), out, dim);
}

/// Every (sequence, head) of the step, split over ATen's threads.
template <typename T>
void attend_all(const PagedDecodeArgs& a, torch::Tensor& out) {
  const int64_t batch = a.query.size(0), heads = a.query.size(1), dim = a.query.size(2);
  const int32_t* lengths = a.lengths.data_ptr<int32_t>();
  const int64_t max_length = batch == 0 ? 0 : *std::max_element(lengths, lengths + batch);
  T* out_data = out.data_ptr<T>();
  at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
    Scratch scratch(max_length, dim);
    for (int64_t i = begin; i < end; ++i) {
      attend_one<T>(a, i / heads, i % heads, scratch, out_data + i * dim);
    }
  });
}

/// The kernel of the including object's capability: float32 or bfloat16.
inline void run(const PagedDecodeArgs& a, torch::Tensor& out) {
  if (a.query.scalar_type() == at::kBFloat16) {
    attend_all<c10::BFloat16>(a, out);
  } else {
    attend_all<float>(a, out);
  }
}

}  // namespace paged_decode_kernel
}  // namespace detail
}  // namespace mha
