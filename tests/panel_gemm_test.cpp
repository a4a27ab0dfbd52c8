// The panel GEMM (src/linear/panel_gemm/) and prepacked weights in panels
// (PrepackOptions().panels(true), prepack's default but on Intel AVX-512,
// load_hf_model's decode side): every
// capability this CPU runs against the same product in float64, within the
// rounding bound of its float32 sum (blocks of 256 in order), at served sizes (E = 512,
// FFN 2048, a 32,000 vocabulary) and ragged ones; bitwise invariance to the
// batch and the thread count; fused bias, ReLU and GELU; the prepacked
// module's contract (float values back bit for bit, save/load, clone,
// quantize_dynamic) in this layout; bad operands.

#include "linear/panel_gemm/panel_gemm.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <mha/mha.h>
#include <torch/torch.h>

#include <cctype>
#include <cmath>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/cpu_capability.h"
#include "linear/packed_linear.h"
#include "support.h"
#include "tolerances.h"

namespace mha {
namespace {

using detail::CpuCapability;
using detail::FusedActivation;
using test::bitwise_equal;
using test::called;
using test::ops_called;
using torch::Tensor;

/// Expects `out` within the bound of the panel GEMM's float32 sum of `in`
/// products, blocks of 256 in order and then the blocks' sums (each step rounds
/// once: |error| <= (min(in, 256) + blocks) * 2^-24 * sum |x_k w_k|), plus the
/// bias's rounding, of the float64 product `x w^T + bias`.
void expect_within_sum_bound(const Tensor& out,
                             const Tensor& x,
                             const Tensor& w,
                             const Tensor& bias) {
  const Tensor xd = x.to(torch::kDouble), wd = w.to(torch::kDouble);
  Tensor exact = at::linear(xd, wd);                        // (M, out)
  const Tensor magnitude = at::linear(xd.abs(), wd.abs());  // sum |x_k w_k|
  const int64_t in = x.size(1), roundings = std::min<int64_t>(in, 256) + (in + 255) / 256;
  Tensor bound = magnitude * (roundings * std::ldexp(1.0, -24));
  if (bias.defined()) {
    exact = exact + bias.to(torch::kDouble);
    bound = bound + (exact.abs() + magnitude) * std::ldexp(1.0, -24);
  }
  const Tensor excess = (out.to(torch::kDouble) - exact).abs() - bound;
  EXPECT_LE(excess.max().item<double>(), 0.0)
      << "max |panel - float64| = " << (out.to(torch::kDouble) - exact).abs().max().item<double>();
}

TEST(PanelGemm, PanelsHoldTheWeightBitForBit) {
  for (const auto& [out, in] :
       std::vector<std::pair<int64_t, int64_t>>{{512, 512}, {37, 19}, {1, 5}, {16, 3}}) {
    const Tensor w = torch::randn({out, in});
    const Tensor panels = detail::to_panels(w);
    EXPECT_EQ(panels.sizes(), (std::vector<int64_t>{(out + 15) / 16, in, 16}));
    EXPECT_TRUE(bitwise_equal(detail::from_panels(panels, out), w)) << out << "x" << in;
  }
}

TEST(PanelGemm, EveryCapabilityIsWithinTheSumBoundOfFloat64) {
  torch::manual_seed(0);
  const std::vector<std::pair<int64_t, int64_t>> weights = {{512, 512},  {2048, 512}, {512, 2048},
                                                            {1536, 512}, {37, 19},    {1, 7}};
  for (const CpuCapability c : detail::available_cpu_capabilities()) {
    for (const auto& [out, in] : weights) {
      const Tensor w = torch::randn({out, in}), bias = torch::randn({out});
      const Tensor panels = detail::to_panels(w);
      for (const int64_t m : {0, 1, 2, 3, 5, 9, 10, 12, 13, 16, 31, 64, 200}) {
        SCOPED_TRACE(std::string(detail::capability_name(c)) + " " + std::to_string(out) + "x" +
                     std::to_string(in) + " M " + std::to_string(m));
        const Tensor x = torch::randn({m, in});
        const Tensor y = detail::panel_gemm(x, panels, out, bias, FusedActivation::kNone, c);
        ASSERT_EQ(y.sizes(), (std::vector<int64_t>{m, out}));
        EXPECT_TRUE(y.is_contiguous());
        if (m > 0) expect_within_sum_bound(y, x, w, bias);
        if (m > 0 && m <= 16)  // without a bias: the same tiles, another epilogue
          expect_within_sum_bound(
              detail::panel_gemm(x, panels, out, Tensor(), FusedActivation::kNone, c), x, w,
              Tensor());
      }
    }
  }
}

TEST(PanelGemm, TheVocabularyHeadIsWithinTheSumBound) {
  torch::manual_seed(1);
  const Tensor w = torch::randn({32000, 512}) * 0.05;
  const Tensor panels = detail::to_panels(w);
  for (const int64_t m : {1, 4, 64}) {
    const Tensor x = torch::randn({m, 512});
    expect_within_sum_bound(detail::panel_gemm(x, panels, 32000, Tensor()), x, w, Tensor());
  }
}

TEST(PanelGemm, FusedActivationsAreTheActivationOfTheSum) {
  torch::manual_seed(2);
  const Tensor w = torch::randn({2048, 512}) * 0.05, bias = torch::randn({2048});
  const Tensor panels = detail::to_panels(w);
  const Tensor x = torch::randn({13, 512});
  const Tensor plain = detail::panel_gemm(x, panels, 2048, bias);
  EXPECT_TRUE(bitwise_equal(detail::panel_gemm(x, panels, 2048, bias, FusedActivation::kReLU),
                            plain.relu()));
  const Tensor gelu = detail::panel_gemm(x, panels, 2048, bias, FusedActivation::kGELU);
  // ATen's erf and this kernel's vectorized one differ in their last bits:
  // the same tolerance as every kernel-versus-kernel comparison here
  const auto tol = support::parity_tolerance(torch::kFloat);
  EXPECT_TRUE(torch::allclose(gelu, at::gelu(plain), tol.rtol, tol.atol))
      << (gelu - at::gelu(plain)).abs().max().item<double>();
}

/// 16 rows: tiles of 6, 5 and 5 rows; 37 rows: one block of rows, split over
/// panel groups; 1,100 rows of 512 features: two blocks of 550 (each block's
/// inputs within 2 MB).
TEST(PanelGemm, ARowIsTheSameInAnyBatchAndOnAnyThreadCount) {
  torch::manual_seed(3);
  const Tensor w = torch::randn({1536, 512}), bias = torch::randn({1536});
  const Tensor panels = detail::to_panels(w);
  for (const int64_t m : {16, 37, 1100}) {
    const Tensor x = torch::randn({m, 512});
    const int threads = at::get_num_threads();
    at::set_num_threads(1);
    const Tensor one_thread = detail::panel_gemm(x, panels, 1536, bias);
    at::set_num_threads(2);
    const Tensor two_threads = detail::panel_gemm(x, panels, 1536, bias);
    at::set_num_threads(threads);
    EXPECT_TRUE(bitwise_equal(one_thread, two_threads)) << m << " rows";
    for (const int64_t row : {int64_t{0}, int64_t{11}, int64_t{12}, m / 2, m - 1}) {
      EXPECT_TRUE(bitwise_equal(detail::panel_gemm(x.narrow(0, row, 1), panels, 1536, bias),
                                one_thread.narrow(0, row, 1)))
          << "row " << row << " of " << m;
    }
  }
}

TEST(PanelGemm, EachObjectKeepsItsOwnBody) {
  for (const CpuCapability c : detail::available_cpu_capabilities()) {
    std::string expected = detail::capability_name(c);
    for (char& ch : expected) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    EXPECT_EQ(detail::panel_gemm_compiled_for(c), expected);
  }
}

TEST(PanelGemm, BadOperandsNameWhatIsWrong) {
  const Tensor panels = detail::to_panels(torch::randn({64, 32}));
  EXPECT_THROW(
      {
        try {
          detail::panel_gemm(torch::randn({2, 31}), panels, 64, Tensor());
        } catch (const c10::Error& e) {
          EXPECT_NE(std::string(e.what()).find(
                        "mat1 and mat2 shapes cannot be multiplied (2x31 and 32x64)"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      c10::Error);
  EXPECT_THROW(detail::panel_gemm(torch::randn({2, 32}), panels, 64, torch::randn({63})),
               c10::Error);
  EXPECT_THROW(detail::panel_gemm(torch::randn({2, 32}), panels, 80, Tensor()), c10::Error);
  EXPECT_THROW(detail::panel_gemm(torch::randn({2, 32}, torch::kDouble), panels, 64, Tensor()),
               c10::Error);
}

/// A decoder layer of the size people serve, in eval mode.
TransformerDecoderLayer serving_decoder_layer() {
  TransformerDecoderLayer layer(
      TransformerLayerOptions(512, 8).dim_feedforward(2048).batch_first(true).activation(
          torch::kGELU));
  layer->eval();
  return layer;
}

TEST(PanelPrepack, DecoderLayerCallsAgreeWithTheFloatModuleAndUseThePanelGemm) {
  torch::manual_seed(4);
  auto layer = serving_decoder_layer();
  auto reference = TransformerDecoderLayer(
      std::dynamic_pointer_cast<TransformerDecoderLayerImpl>(layer->clone()));
  prepack(layer, PrepackOptions().panels(true));
  EXPECT_TRUE(is_prepacked(*layer));
  const Tensor memory = torch::randn({4, 20, 512});
  for (const int64_t n : {1, 4}) {
    for (const int64_t t : {1, 16}) {
      const Tensor tgt = torch::randn({n, t, 512});
      const c10::InferenceMode inference;
      Tensor out;
      const auto ops = ops_called([&] { out = layer(tgt, memory.narrow(0, 0, n)); });
      EXPECT_TRUE(called(ops, "mha::panel_gemm"));
      EXPECT_FALSE(called(ops, "mkldnn::_linear_pointwise"));
      const auto tol = support::parity_tolerance(torch::kFloat);
      const Tensor expected = reference(tgt, memory.narrow(0, 0, n));
      EXPECT_TRUE(torch::allclose(out, expected, tol.rtol, tol.atol))
          << "N " << n << " T " << t << ": " << (out - expected).abs().max().item<double>();
    }
  }
}

TEST(PanelPrepack, TheDefaultLayoutIsPanelsButOnIntelAvx512) {
  // PrepackOptions::panels unset: oneDNN's layout on an Intel CPU with AVX-512
  // (and oneDNN's ops), panels elsewhere. The design card's call: a sequence-first
  // MultiheadAttention(512, 8), self-attention, at 1, 16 and 8 x 128 tokens.
  torch::manual_seed(6);
  MultiheadAttention attn(MultiheadAttentionOptions(512, 8));
  attn->eval();
  auto reference =
      MultiheadAttention(std::dynamic_pointer_cast<MultiheadAttentionImpl>(attn->clone()));
  prepack(attn);
  const bool panels = !detail::PackedLinearOps::onednn().available() ||
                      detail::best_cpu_capability() != CpuCapability::kAvx512 ||
                      detail::cpu_is_amd();
  for (const auto& [len, batch] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {16, 1}, {128, 8}}) {
    const Tensor x = torch::randn({len, batch, 512});  // (L, N, E)
    const c10::InferenceMode inference;
    Tensor out;
    const auto ops = ops_called([&] { out = std::get<0>(attn->forward(x, x, x, {}, false)); });
    EXPECT_EQ(called(ops, "mha::panel_gemm"), panels) << len << " x " << batch;
    EXPECT_EQ(called(ops, "mkldnn::_linear_pointwise"), !panels) << len << " x " << batch;
    const Tensor expected = std::get<0>(reference->forward(x, x, x, {}, false));  // (L, N, E)
    const auto tol = support::parity_tolerance(torch::kFloat);
    EXPECT_TRUE(torch::allclose(out, expected, tol.rtol, tol.atol))
        << len << " x " << batch << ": " << (out - expected).abs().max().item<double>();
  }
}

TEST(PanelPrepack, TheFloatValuesSaveLoadCloneAndQuantizeAsOneDnnsDo) {
  torch::manual_seed(5);
  auto layer = serving_decoder_layer();
  const auto before = state_dict(*layer);
  prepack(layer, PrepackOptions().panels(true));
  const auto after = state_dict(*layer);
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(after[i].second, before[i].second)) << before[i].first;
  }
  std::ostringstream printed;
  printed << *layer;
  EXPECT_NE(printed.str().find("panels=true"), std::string::npos) << printed.str();

  const Tensor tgt = torch::randn({2, 3, 512}), memory = torch::randn({2, 7, 512});
  const c10::InferenceMode inference;
  const Tensor out = layer(tgt, memory);
  auto copy = TransformerDecoderLayer(
      std::dynamic_pointer_cast<TransformerDecoderLayerImpl>(layer->clone()));
  EXPECT_TRUE(bitwise_equal(copy(tgt, memory), out)) << "clone";

  std::stringstream archive;
  torch::save(layer, archive);
  auto loaded = serving_decoder_layer();
  prepack(loaded, PrepackOptions().panels(true));
  torch::load(loaded, archive);
  EXPECT_TRUE(bitwise_equal(loaded(tgt, memory), out)) << "torch::save / torch::load";

  unpack(*copy);
  EXPECT_FALSE(is_prepacked(*copy));
  const auto unpacked = state_dict(*copy);
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(unpacked[i].second, before[i].second)) << before[i].first;
  }
  quantize_dynamic(*layer);
  EXPECT_TRUE(is_quantized(*layer));
}

}  // namespace
}  // namespace mha
