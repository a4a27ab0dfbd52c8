// The paged decode kernel (src/attention/paged_decode/): every capability this
// CPU runs against attention over the same keys gathered and computed in
// float64, at served head dims and lengths up to 4096; bitwise invariance to
// the batch and to the thread count; float32 and bfloat16 pools; bad arguments.

#include <ATen/Parallel.h>

#include <algorithm>
#include <cctype>
#include <numeric>
#include <random>

#include "attention/paged_decode/paged_decode.h"
#include "support.h"

namespace mha {
namespace {

using detail::CpuCapability;
using detail::PagedDecodeArgs;
using test::bitwise_equal;
using test::tensors_close;

/// A pool of `blocks` blocks and N sequences of `lengths`, each given
/// distinct blocks in a shuffled order (the table is not monotone).
PagedDecodeArgs make_step(const std::vector<int32_t>& lengths,
                          int64_t heads,
                          int64_t dim,
                          int64_t block_size,
                          torch::ScalarType dtype) {
  const auto n = static_cast<int64_t>(lengths.size());
  int64_t max_blocks = 1, total_blocks = 0;
  for (const int32_t len : lengths) {
    max_blocks = std::max<int64_t>(max_blocks, (len + block_size - 1) / block_size);
    total_blocks += (len + block_size - 1) / block_size;
  }
  const int64_t pool_blocks = total_blocks + 3;  // some blocks no sequence holds
  std::vector<int32_t> order(pool_blocks);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  torch::Tensor table = torch::zeros({n, max_blocks}, torch::kInt);
  size_t next = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t b = 0; b < (lengths[i] + block_size - 1) / block_size; ++b) {
      table[i][b] = order[next++];
    }
  }
  const auto opts = torch::TensorOptions().dtype(dtype);
  return {torch::randn({n, heads, dim}, opts),
          torch::randn({pool_blocks, block_size, heads, dim}, opts),
          torch::randn({pool_blocks, block_size, heads, dim}, opts), table,
          torch::tensor(lengths, torch::kInt)};
}

/// Sequence `n`'s attention in float64 over its keys gathered by the table: (H, hd).
torch::Tensor reference(const PagedDecodeArgs& a, int64_t n) {
  const int64_t len = a.lengths[n].item<int64_t>(), block_size = a.keys.size(1);
  const torch::Tensor pos = torch::arange(len);
  const torch::Tensor rows =
      a.block_table[n].to(torch::kLong).index_select(0, pos.div(block_size, "floor")) * block_size +
      pos.remainder(
          block_size);  // (S,): rows of the pool flattened to (blocks * block_size, H, hd)
  const torch::Tensor k =
      a.keys.flatten(0, 1).index_select(0, rows).to(torch::kDouble);  // (S, H, hd)
  const torch::Tensor v = a.values.flatten(0, 1).index_select(0, rows).to(torch::kDouble);
  const torch::Tensor q = a.query[n].to(torch::kDouble).unsqueeze(1);  // (H, 1, hd)
  const torch::Tensor out =
      torch::scaled_dot_product_attention(q, k.transpose(0, 1), v.transpose(0, 1));  // (H, 1, hd)
  return out.squeeze(1);
}

/// The step's sequences `n` alone: its query, table row and length.
PagedDecodeArgs alone(const PagedDecodeArgs& a, int64_t n) {
  return {a.query.narrow(0, n, 1), a.keys, a.values, a.block_table.narrow(0, n, 1),
          a.lengths.narrow(0, n, 1).contiguous()};
}

TEST(PagedDecodeKernel, EveryCapabilityMatchesAttentionOverGatheredKeys) {
  torch::manual_seed(0);
  const std::vector<int32_t> lengths = {1, 7, 100, 513, 4096};
  for (const CpuCapability c : detail::available_cpu_capabilities()) {
    for (const int64_t dim : {32, 64, 80, 128}) {
      for (const int64_t block_size : {1, 16, 32}) {
        if (block_size == 1 && dim != 64) continue;  // 4096 one-row blocks: once is enough
        const PagedDecodeArgs a = make_step(lengths, 8, dim, block_size, torch::kFloat);
        const torch::Tensor out = detail::paged_decode_attention(a, c);  // (N, H, hd)
        for (int64_t n = 0; n < static_cast<int64_t>(lengths.size()); ++n) {
          EXPECT_TRUE(tensors_close(out[n].to(torch::kDouble), reference(a, n), 1e-5, 1e-6))
              << detail::capability_name(c) << " hd " << dim << " block " << block_size
              << " length " << lengths[n];
        }
      }
    }
  }
}

TEST(PagedDecodeKernel, BFloat16PoolsMatchWithinBFloat16Rounding) {
  torch::manual_seed(1);
  const std::vector<int32_t> lengths = {3, 64, 1000};
  for (const CpuCapability c : detail::available_cpu_capabilities()) {
    const PagedDecodeArgs a = make_step(lengths, 8, 64, 16, torch::kBFloat16);
    const torch::Tensor out = detail::paged_decode_attention(a, c);
    ASSERT_EQ(out.scalar_type(), torch::kBFloat16);
    for (int64_t n = 0; n < 3; ++n) {
      // The output is rounded to bfloat16 (8 significant bits): 2^-8 relative.
      EXPECT_TRUE(tensors_close(out[n].to(torch::kDouble), reference(a, n), 8e-3, 2e-3))
          << detail::capability_name(c) << " length " << lengths[n];
    }
  }
}

TEST(PagedDecodeKernel, EachSequenceIsBitwiseTheSameInAnyBatchAndThreadCount) {
  torch::manual_seed(2);
  const std::vector<int32_t> lengths = {5, 300, 17, 2048, 1, 64, 129, 900};
  const PagedDecodeArgs a = make_step(lengths, 8, 64, 16, torch::kFloat);
  const int threads = at::get_num_threads();
  for (const CpuCapability c : detail::available_cpu_capabilities()) {
    const torch::Tensor batch = detail::paged_decode_attention(a, c);
    at::set_num_threads(1);
    const torch::Tensor one_thread = detail::paged_decode_attention(a, c);
    at::set_num_threads(threads);
    EXPECT_TRUE(bitwise_equal(batch, one_thread)) << detail::capability_name(c);
    for (int64_t n = 0; n < static_cast<int64_t>(lengths.size()); ++n) {
      EXPECT_TRUE(bitwise_equal(batch[n], detail::paged_decode_attention(alone(a, n), c)[0]))
          << detail::capability_name(c) << " sequence " << n;
    }
  }
}

TEST(PagedDecodeKernel, TheBestCapabilityIsTheDefaultChoice) {
  const PagedDecodeArgs a = make_step({40, 3}, 4, 64, 16, torch::kFloat);
  const CpuCapability best = detail::available_cpu_capabilities().back();
  EXPECT_TRUE(
      bitwise_equal(detail::paged_decode_attention(a), detail::paged_decode_attention(a, best)));
  std::cout << "paged decode kernel on this CPU: " << detail::capability_name(best) << "\n";
}

TEST(PagedDecodeKernel, EachCapabilityRunsItsOwnBody) {
  // The three objects' inline functions share mangled names unless each is in
  // its capability's namespace; then the linker keeps one body (the scalar
  // one) for every entry, and the comparisons above still pass.
  for (const CpuCapability c : detail::available_cpu_capabilities()) {
    std::string expected = detail::capability_name(c);
    for (char& ch : expected) ch = static_cast<char>(std::toupper(ch));
    EXPECT_EQ(detail::paged_decode_compiled_for(c), expected);
  }
}

TEST(PagedDecodeKernel, DenseBuffersAreOneBlockPerSequence) {
  torch::manual_seed(4);
  // A KVCache's buffers: (N, H, capacity, hd), the first S positions attended.
  const torch::Tensor buffer_k = torch::randn({3, 8, 50, 64}),
                      buffer_v = torch::randn({3, 8, 50, 64});
  const torch::Tensor keys = buffer_k.narrow(2, 0, 37), values = buffer_v.narrow(2, 0, 37);
  const torch::Tensor q = torch::randn({3, 8, 64});
  const torch::Tensor expected = torch::scaled_dot_product_attention(  // (N, H, 1, hd)
      q.to(torch::kDouble).unsqueeze(2), keys.to(torch::kDouble), values.to(torch::kDouble));
  for (const CpuCapability c : detail::available_cpu_capabilities()) {
    const torch::Tensor out =
        detail::paged_decode_attention(detail::dense_blocks(q, keys, values), c);
    EXPECT_TRUE(tensors_close(out.to(torch::kDouble), expected.squeeze(2), 1e-5, 1e-6))
        << detail::capability_name(c);
  }
}

TEST(PagedDecodeKernel, AnEmptySequenceGivesZeros) {
  const PagedDecodeArgs a = make_step({0, 9}, 2, 32, 4, torch::kFloat);
  const torch::Tensor out = detail::paged_decode_attention(a);
  EXPECT_TRUE(bitwise_equal(out[0], torch::zeros({2, 32})));
}

TEST(PagedDecodeKernel, BadArgumentsThrowNamingThem) {
  PagedDecodeArgs a = make_step({9}, 2, 32, 4, torch::kFloat);
  PagedDecodeArgs bad = a;
  bad.block_table = a.block_table.to(torch::kLong);
  MHA_ASSERT_THROWS_WITH(detail::paged_decode_attention(bad),
                         "expected block_table (1, max_blocks) int32");
  bad = a;
  bad.block_table = a.block_table.clone();
  bad.block_table[0][1] = 1000;
  MHA_ASSERT_THROWS_WITH(detail::paged_decode_attention(bad),
                         "expected block_table[0][1] in [0, 6), but got 1000");
  bad = a;
  bad.lengths = torch::tensor({13}, torch::kInt);
  MHA_ASSERT_THROWS_WITH(detail::paged_decode_attention(bad),
                         "expected lengths[0] in [0, 12], but got 13");
  bad = a;
  bad.values = a.values.to(torch::kDouble);
  MHA_ASSERT_THROWS_WITH(detail::paged_decode_attention(bad),
                         "expected keys and values (blocks, block_size, 2, 32) of Float");
}

}  // namespace
}  // namespace mha
