// libFuzzer target: mha::MultiheadAttention construction and forward with
// whatever a caller can pass. The bytes choose the options (valid or not),
// the module's dtype, mode and grad mode, the fast-path switch, the shapes of
// query, key and value (0 sizes, ranks 1-4, wrong feature sizes, strided
// views), which of them are the same tensor, their values (NaN, +-Inf, huge),
// both masks (dtype, rank, shape, fully masked rows), need_weights,
// average_attn_weights and is_causal; sometimes the functional form with
// static_k/static_v instead.
//
// Contract checked: every call returns or throws c10::Error (an ATen or mha
// INTERNAL ASSERT, another exception type, a crash or a sanitizer report is a
// finding), and a returned output has the documented shape (query's shape;
// weights (N, L, S') averaged or (N, H, L, S') per head, or undefined).
//
// Build: -DCMAKE_CXX_COMPILER=clang++ -DMHA_BUILD_FUZZERS=ON (implies ASan+UBSan).
// Run:   source tests/sanitizers/env.sh; mha_fuzz_forward NEW_CORPUS tests/fuzz/corpus/forward

#include <c10/util/Exception.h>
#include <fuzzer/FuzzedDataProvider.h>
#include <mha/functional.h>
#include <mha/multihead_attention.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "silent_warnings.h"

namespace {

using torch::Tensor;

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "mha_fuzz_forward: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

constexpr c10::ScalarType kFloatTypes[] = {torch::kFloat32, torch::kFloat64, torch::kFloat16,
                                           torch::kBFloat16};
constexpr c10::ScalarType kMaskTypes[] = {torch::kBool,    torch::kFloat32,  torch::kFloat64,
                                          torch::kFloat16, torch::kBFloat16, torch::kInt64,
                                          torch::kUInt8,   torch::kInt32};

struct Decoder {
  FuzzedDataProvider& in;

  int64_t small(int64_t lo, int64_t hi) { return in.ConsumeIntegralInRange<int64_t>(lo, hi); }
  bool coin() { return in.ConsumeBool(); }
  /// True with probability about 1/n.
  bool rarely(int n = 8) { return in.ConsumeIntegralInRange<int>(0, n - 1) == 0; }
  c10::ScalarType float_type() { return kFloatTypes[small(0, 3)]; }

  /// A tensor of `shape`, `dtype`, random values with a few special ones,
  /// sometimes a non-contiguous view with the same sizes.
  Tensor values(std::vector<int64_t> shape, c10::ScalarType dtype) {
    Tensor t;
    const bool strided = shape.size() >= 2 && rarely(4);
    if (strided) {
      std::swap(shape.front(), shape.back());
    }
    if (dtype == torch::kBool) {
      t = torch::rand(shape) < (static_cast<double>(small(0, 4)) / 4.0);
    } else if (at::isFloatingType(dtype)) {
      t = torch::randn(shape).mul_(static_cast<double>(small(1, 4))).to(dtype);
    } else {
      t = torch::randint(0, 3, shape).to(dtype);
    }
    if (t.numel() > 0 && at::isFloatingType(dtype)) {
      const int specials = static_cast<int>(small(0, 3)) == 0 ? static_cast<int>(small(1, 3)) : 0;
      static const double kSpecial[] = {std::numeric_limits<double>::quiet_NaN(),
                                        std::numeric_limits<double>::infinity(),
                                        -std::numeric_limits<double>::infinity(),
                                        1e30,
                                        -1e30,
                                        0.0};
      auto flat = t.view(-1);
      for (int i = 0; i < specials; ++i) {
        flat[small(0, t.numel() - 1)] = kSpecial[small(0, 5)];
      }
    }
    if (strided) {
      t = t.transpose(0, t.dim() - 1);
    }
    return t;
  }

  /// A shape: usually `valid`, sometimes perturbed (rank or one size).
  std::vector<int64_t> shape(std::vector<int64_t> valid) {
    if (!rarely(6)) return valid;
    switch (small(0, 2)) {
      case 0:  // drop or add a dimension
        if (!valid.empty() && coin()) {
          valid.pop_back();
        } else {
          valid.push_back(small(0, 3));
        }
        return valid;
      case 1:  // change one size
        if (!valid.empty()) valid[small(0, valid.size() - 1)] = small(0, 7);
        return valid;
      default:  // anything of rank 0-4
        std::vector<int64_t> any(small(0, 4));
        for (auto& d : any) d = small(0, 5);
        return any;
    }
  }
};

void check_shapes(const Tensor& query,
                  const Tensor& out,
                  const Tensor& weights,
                  bool need_weights,
                  bool average,
                  int64_t num_heads,
                  bool batch_first) {
  if (!out.defined()) finding("undefined output");
  if (out.sizes() != query.sizes()) {
    finding("output shape " + c10::str(out.sizes()) + " differs from query shape " +
            c10::str(query.sizes()));
  }
  if (!need_weights) {
    if (weights.defined()) finding("weights defined although need_weights is false");
    return;
  }
  if (!weights.defined()) {
    // Python's native fast path returns no weights for an empty input.
    if (query.numel() == 0) return;
    finding("weights undefined although need_weights is true");
  }
  const bool batched = query.dim() == 3;
  const int64_t L = batched ? query.size(batch_first ? 1 : 0) : query.size(0);
  const int64_t N = batched ? query.size(batch_first ? 0 : 1) : 1;
  std::vector<int64_t> expected;
  if (batched) expected.push_back(N);
  if (!average) expected.push_back(num_heads);
  expected.push_back(L);
  const int64_t rank = static_cast<int64_t>(expected.size()) + 1;
  if (weights.dim() != rank ||
      !std::equal(expected.begin(), expected.end(), weights.sizes().begin())) {
    finding("weights shape " + c10::str(weights.sizes()) + " is not [" +
            c10::str(c10::IntArrayRef(expected)) + ", S]");
  }
}

/// Options, mostly valid and small, sometimes anything; nullopt when
/// construction rejects them (as it must, with a c10::Error).
std::optional<mha::MultiheadAttention> make_module(Decoder& d) {
  int64_t num_heads = d.small(1, 4);
  int64_t embed_dim = num_heads * d.small(1, 4);
  if (d.rarely(16)) {
    num_heads = d.small(-2, 6);
    embed_dim = d.small(-2, 12);
  }
  auto options = mha::MultiheadAttentionOptions(embed_dim, num_heads)
                     .bias(!d.rarely(4))
                     .add_bias_kv(d.rarely(4))
                     .add_zero_attn(d.rarely(4))
                     .batch_first(d.coin());
  if (d.rarely(4)) options.kdim(d.small(d.rarely(8) ? -1 : 1, 6));
  if (d.rarely(4)) options.vdim(d.small(d.rarely(8) ? -1 : 1, 6));
  static const double kDropout[] = {0.0, 0.0, 0.25, 1.0, 1.5, -0.5};
  options.dropout(kDropout[d.small(0, 5)]);
  try {
    return mha::MultiheadAttention(options);
  } catch (const c10::Error&) {
    return std::nullopt;  // invalid options are reported at construction
  }
}

/// One call's arguments, decoded.
struct Call {
  bool batched = true;
  int64_t L = 0, S = 0, N = 0;
  Tensor query, key, value, key_padding_mask, attn_mask;
  bool need_weights = false, average = true, is_causal = false, functional = false;
};

/// query, key and value with their identity (0: q=k=v, 1: k=v, 2: none, 3:
/// v=q), usually of valid shapes, sometimes another dtype or a leaf that
/// requires grad.
void decode_inputs(Decoder& d,
                   const mha::MultiheadAttentionOptions& options,
                   c10::ScalarType dtype,
                   bool grad,
                   Call& c) {
  const int64_t E = options.embed_dim();
  const int64_t kdim = options.kdim().value_or(E), vdim = options.vdim().value_or(E);
  c.batched = !d.rarely(5);
  c.L = d.small(0, 6);
  c.N = d.small(0, 3);
  c.S = d.small(0, 6);
  const int identity = static_cast<int>(d.small(0, 3));
  if (identity == 0) c.S = c.L;
  auto input = [&](int64_t length, int64_t features) {
    std::vector<int64_t> shape = !c.batched ? std::vector<int64_t>{length, features}
                                 : options.batch_first()
                                     ? std::vector<int64_t>{c.N, length, features}
                                     : std::vector<int64_t>{length, c.N, features};
    Tensor t = d.values(d.shape(shape), d.rarely(10) ? d.float_type() : dtype);
    // A leaf (strides kept) that requires grad, when grad mode is on.
    return grad ? t.detach().requires_grad_(at::isFloatingType(t.scalar_type())) : t;
  };
  c.query = input(c.L, E);
  switch (identity) {
    case 0:
      c.key = c.value = c.query;
      break;
    case 1:
      c.key = c.value = input(c.S, kdim);
      break;
    case 3:
      c.key = input(c.S, kdim);
      c.value = c.query;
      break;
    default:
      c.key = input(c.S, kdim);
      c.value = input(c.S, vdim);
  }
}

/// Masks: none, or a dtype and a (usually valid) shape; sometimes fully masked
/// rows or a causal mask.
void decode_masks(Decoder& d, int64_t num_heads, Call& c) {
  auto mask_type = [&] { return d.coin() ? torch::kBool : kMaskTypes[d.small(0, 7)]; };
  if (d.coin()) {
    const auto s = c.batched ? std::vector<int64_t>{c.N, c.S} : std::vector<int64_t>{c.S};
    c.key_padding_mask = d.values(d.shape(s), mask_type());
    if (d.rarely(4) && c.key_padding_mask.scalar_type() == torch::kBool) {
      c.key_padding_mask.fill_(true);  // every key ignored: fully masked rows
    }
  }
  if (d.coin()) {
    std::vector<int64_t> s = {c.L, c.S};
    if (d.coin()) s.insert(s.begin(), (c.batched ? c.N : 1) * num_heads);
    const auto type = mask_type();
    if (d.rarely(3) && s.size() == 2) {
      c.attn_mask = torch::ones({c.L, c.S}, torch::kBool).triu(1);  // causal
      if (type != torch::kBool) {
        const double fill = at::isFloatingType(type) ? -1e4 : 1.0;
        c.attn_mask = torch::zeros({c.L, c.S}, type).masked_fill(c.attn_mask, fill);
      }
    } else {
      c.attn_mask = d.values(d.shape(s), type);
    }
  }
}

/// The functional form (sequence-first) with the module's weights, and
/// static_k/static_v sometimes.
std::tuple<Tensor, Tensor> call_functional(Decoder& d,
                                           const mha::MultiheadAttention& module,
                                           c10::ScalarType dtype,
                                           const Call& c) {
  namespace F = mha::functional;
  const auto& options = module->options;
  const int64_t E = options.embed_dim(), num_heads = options.num_heads();
  auto fo = F::MultiheadAttentionForwardFuncOptions(
                E, num_heads, module->in_proj_weight, module->in_proj_bias, module->bias_k,
                module->bias_v, options.add_zero_attn(), options.dropout(),
                module->out_proj->weight, module->out_proj->bias)
                .training(module->is_training())
                .key_padding_mask(c.key_padding_mask)
                .need_weights(c.need_weights)
                .attn_mask(c.attn_mask)
                .average_attn_weights(c.average)
                .is_causal(c.is_causal);
  if (!module->in_proj_weight.defined()) {
    fo.use_separate_proj_weight(true)
        .q_proj_weight(module->q_proj_weight)
        .k_proj_weight(module->k_proj_weight)
        .v_proj_weight(module->v_proj_weight);
  }
  const int64_t head_dim = E / num_heads;
  if (d.coin()) {
    fo.static_k(d.values(d.shape({c.N * num_heads, c.S, head_dim}), dtype));
  }
  if (d.coin()) {
    fo.static_v(d.values(d.shape({c.N * num_heads, c.S, head_dim}), dtype));
  }
  return F::multi_head_attention_forward(c.query, c.key, c.value, fo);
}

void run_one(FuzzedDataProvider& provider) {
  Decoder d{provider};
  torch::manual_seed(d.small(0, 1000));
  auto made = make_module(d);
  if (!made) return;
  mha::MultiheadAttention module = *made;

  const c10::ScalarType dtype = d.rarely(3) ? d.float_type() : torch::kFloat32;
  module->to(dtype);
  module->train(d.rarely(3));
  const bool grad = d.rarely(3);
  const mha::FastPathGuard fast_path(!d.rarely(6));

  Call c;
  decode_inputs(d, module->options, dtype, grad, c);
  decode_masks(d, module->options.num_heads(), c);
  c.need_weights = d.coin();
  c.average = !d.rarely(3);
  c.is_causal = d.rarely(4);
  c.functional = d.rarely(6);

  torch::AutoGradMode grad_mode(grad);
  Tensor out, weights;
  if (!c.functional) {
    std::tie(out, weights) = module->forward(c.query, c.key, c.value, c.key_padding_mask,
                                             c.need_weights, c.attn_mask, c.average, c.is_causal);
    check_shapes(c.query, out, weights, c.need_weights, c.average, module->options.num_heads(),
                 module->options.batch_first());
  } else {
    std::tie(out, weights) = call_functional(d, module, dtype, c);
  }
  if (grad && out.defined() && out.requires_grad()) {
    Tensor loss = out.sum();
    if (weights.defined()) loss = loss + weights.sum();
    loss.backward();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  torch::set_num_threads(1);
  // Warnings (mask dtype mismatch, ...) are not findings.
  static mha::support::SilentWarnings silent;
  c10::WarningUtils::set_warning_handler(&silent);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider provider(data, size);
  try {
    run_one(provider);
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    if (message.find("INTERNAL ASSERT FAILED") != std::string::npos) {
      finding("internal assert instead of an argument error: " + message);
    }
  } catch (const std::exception& e) {
    finding(std::string("exception other than c10::Error: ") + e.what());
  }
  return 0;
}
