// Parity with Python: each case written by scripts/export_reference.py (from the
// installed torch, at test time) is rebuilt in C++ and compared output, weights,
// gradients and initialisation, twice: with mha's kernels, and with Python's
// (mha::PythonKernelsGuard). Each run asserts the kernel the call must take
// (Python's path, as the case records it, and mha's rule) by the ATen ops it
// ran, and bitwise equality wherever that kernel is Python's. Prints how many
// cases are bitwise equal.

#include <mha/multihead_attention.h>
#include <torch/serialize.h>

#include <iostream>

#include "attention/call_plan.h"
#include "dtype_names.h"
#include "file_bytes.h"
#include "parity_report.h"
#include "reference_bundle.h"
#include "support.h"
#include "tolerances.h"

namespace {

using mha::detail::AttentionKernel;
using mha::support::ReferenceCase;
using mha::test::bitwise_equal;
using mha::test::tensors_close;
using torch::Tensor;

std::string reference_dir() {
  const char* dir = std::getenv("MHA_REFERENCE_DIR");
  return dir ? dir : MHA_DEFAULT_REFERENCE_DIR;
}

/// Printed after the suite (not deleted: gtest owns registered environments).
mha::support::BitwiseReport& report() {
  static auto* const r =
      static_cast<mha::support::BitwiseReport*>(::testing::AddGlobalTestEnvironment(
          new mha::support::BitwiseReport("parity", "output, weights, gradients")));
  return *r;
}
const auto& kReport = report();

/// Device the cases run on: cpu, or MHA_PARITY_DEVICE (e.g. cuda) for scripts/gpu_check.sh.
torch::Device parity_device() {
  const char* device = std::getenv("MHA_PARITY_DEVICE");
  return torch::Device(device ? device : "cpu");
}

/// Python's exception when it raised for the case ("expected_error"), else empty.
std::string expected_error(const std::string& path) {
  const auto top = torch::pickle_load(mha::support::read_file_bytes(path)).toGenericDict();
  return top.contains("expected_error") ? top.at("expected_error").toStringRef() : "";
}

/// The kernel a case must take: where Python's module ran its functional
/// steps, those, or `kSequenceFirst` where mha's rule takes it (never while
/// Python's kernels are on); where it ran its native op, mha's rule for the
/// call (which gives `kPython` while Python's kernels are on).
AttentionKernel expected_kernel(const ReferenceCase& ref,
                                const mha::MultiheadAttentionImpl& module,
                                const mha::detail::AttentionCall& call) {
  if (ref.python_kernel != "native") {
    return mha::detail::takes_sequence_first_kernel(mha::detail::AttentionWeights::of(module), call)
               ? AttentionKernel::kSequenceFirst
               : AttentionKernel::kFunctional;
  }
  const int64_t batch = call.query.size(0), seq_len = call.query.size(1);  // (N, L, E)
  return mha::detail::choose_fast_path_kernel(
      batch, seq_len, ref.need_weights, call.masked(),
      mha::detail::has_prepacked_projections(mha::detail::AttentionWeights::of(module)));
}

/// Whether the ATen ops a call ran are those of `kernel`: Python's native op
/// for kPython and kNative only, SDPA without it for kFused, neither for
/// kByHead; SDPA without the functional steps' split of the projection
/// (`unflatten`) for kSequenceFirst.
::testing::AssertionResult ran_kernel(const std::vector<std::string>& ops, AttentionKernel kernel) {
  const bool native = mha::test::called(ops, "aten::_native_multi_head_attention");
  const bool sdpa = mha::test::called(ops, "aten::scaled_dot_product_attention");
  const bool split = mha::test::called(ops, "aten::unflatten");
  const bool ok = kernel == AttentionKernel::kPython || kernel == AttentionKernel::kNative ? native
                  : kernel == AttentionKernel::kFused         ? sdpa && !native
                  : kernel == AttentionKernel::kByHead        ? !sdpa && !native
                  : kernel == AttentionKernel::kSequenceFirst ? sdpa && !native && !split
                                                              : !native;
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "kernel " << static_cast<int>(kernel) << " expected; native op ran: " << native
         << ", SDPA ran: " << sdpa << ", the projection split: " << split;
}

using mha::test::ParityParam;

class ReferenceParity : public ::testing::TestWithParam<ParityParam> {
 protected:
  void SetUp() override { torch::set_num_threads(1); }  // as export_reference.py
};

TEST_P(ReferenceParity, MatchesPython) {
  const auto& [name, python_kernels] = GetParam();
  const mha::PythonKernelsGuard kernels(python_kernels);
  const std::string path = reference_dir() + "/" + name + ".pt";
  const ReferenceCase ref = mha::support::read_reference_case(path);
  const c10::ScalarType dtype = mha::support::dtype_from_name(ref.dtype);
  const auto [rtol, atol] = mha::support::parity_tolerance(dtype);
  bool bitwise = true;
  auto compare = [&](const Tensor& actual, const Tensor& expected, const std::string& what) {
    ASSERT_TRUE(actual.defined()) << what << " is undefined";
    const Tensor on_cpu = actual.cpu();
    EXPECT_TRUE(tensors_close(on_cpu, expected, rtol, atol)) << what;
    bitwise = bitwise && bitwise_equal(on_cpu, expected);
  };

  // Same initialisation as Python from the same seed: names, order and values.
  torch::manual_seed(ref.init_seed);
  mha::MultiheadAttention fresh(ref.options);
  const auto init = fresh->named_parameters();
  ASSERT_EQ(init.size(), ref.init_state_dict.size());
  for (size_t i = 0; i < init.size(); ++i) {
    EXPECT_EQ(init.keys()[i], ref.init_state_dict[i].first) << "parameter order";
    EXPECT_TRUE(bitwise_equal(init.values()[i].detach(), ref.init_state_dict[i].second))
        << "init of " << ref.init_state_dict[i].first;
  }

  const torch::Device device = parity_device();
  if (!device.is_cpu()) {
    MHA_SKIP_WITHOUT_CUDA();
    if (ref.training && ref.options.dropout() > 0) GTEST_SKIP() << "dropout draws differ off CPU";
  }
  mha::MultiheadAttention module = mha::support::make_module(ref);
  module->to(device);
  auto [query, key, value] = mha::support::make_inputs(ref, ref.grad, device);
  const auto input = [&](const char* name) {
    return ref.inputs.count(name) ? ref.inputs.at(name).to(device) : Tensor();
  };

  torch::manual_seed(ref.forward_seed);
  Tensor out, weights;
  const std::string python_error = expected_error(path);
  if (!python_error.empty()) {
    // Python raised for this input: so must we (a c10::Error, not a crash).
    torch::AutoGradMode grad_mode(ref.grad);
    try {
      module(query, key, value, input("key_padding_mask"), ref.need_weights, input("attn_mask"),
             ref.average_attn_weights, ref.is_causal);
      ADD_FAILURE() << "Python raised but mha returned; Python: " << python_error;
    } catch (const c10::Error& e) {
      std::cout << "  Python: " << python_error.substr(0, 160)
                << "\n  mha:    " << std::string(e.what_without_backtrace()).substr(0, 160) << "\n";
    }
    if (!python_kernels) report().add_raise();
    return;
  }
  const Tensor kpm = input("key_padding_mask"), attn_mask = input("attn_mask");
  AttentionKernel kernel;
  {
    torch::AutoGradMode grad_mode(ref.grad);  // the rule reads it (prepacked weights need none)
    const mha::detail::AttentionCall call{
        query,        key, value, kpm, attn_mask, ref.need_weights, ref.average_attn_weights,
        ref.is_causal};
    kernel = expected_kernel(ref, *module, call);
    if (ref.name.rfind("SeqFirstE512", 0) == 0) {  // the cases written for it
      EXPECT_EQ(kernel,
                python_kernels ? AttentionKernel::kFunctional : AttentionKernel::kSequenceFirst);
    }
    const auto ops = mha::test::ops_called([&] {
      std::tie(out, weights) = module(query, key, value, kpm, ref.need_weights, attn_mask,
                                      ref.average_attn_weights, ref.is_causal);
    });
    EXPECT_TRUE(ran_kernel(ops, kernel)) << "Python ran its " << ref.python_kernel << " path";
  }
  compare(out, ref.expected.at("output"), "output");
  if (ref.expected.count("weights")) {
    compare(weights, ref.expected.at("weights"), "weights");
  } else {
    // Without need_weights; also Python's native fast path on an empty input.
    EXPECT_FALSE(weights.defined()) << "weights must be undefined, as Python's are None";
  }

  if (ref.grad) {
    Tensor loss = (out * ref.cotangents.at("output")).sum();
    if (weights.defined()) loss = loss + (weights * ref.cotangents.at("weights")).sum();
    loss.backward();
    const std::map<std::string, Tensor> leaves{{"query", query}, {"key", key}, {"value", value}};
    for (const auto& [name, expected] : ref.grads) {
      const Tensor actual = name.rfind("param.", 0) == 0
                                ? module->named_parameters()[name.substr(6)].grad()
                                : leaves.at(name).grad();
      compare(actual, expected, "gradient of " + name);
    }
  }

  // Python's kernel, Python's bits (on the CPU: other devices' kernels differ).
  const bool pythons_kernel =
      kernel == AttentionKernel::kFunctional || kernel == AttentionKernel::kPython ||
      kernel == AttentionKernel::kNative || kernel == AttentionKernel::kSequenceFirst;
  if (pythons_kernel && device.is_cpu()) {
    EXPECT_TRUE(bitwise) << "the kernel is Python's, so every number must be Python's bits";
  }
  if (!python_kernels) report().add(ref.dtype, ref.name, bitwise);
}

INSTANTIATE_TEST_SUITE_P(
    Python,
    ReferenceParity,
    mha::test::both_kernel_choices(mha::support::read_manifest(reference_dir())),
    mha::test::parity_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ReferenceParity);

/// The fixture must have produced the matrix; an empty run is a failure, not a pass.
TEST(ReferenceParityManifest, HasAtLeast80Cases) {
  EXPECT_GE(mha::support::read_manifest(reference_dir()).size(), 80u)
      << "run `python scripts/export_reference.py --out " << reference_dir() << "`";
}

}  // namespace
