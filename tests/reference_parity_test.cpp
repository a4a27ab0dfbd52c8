// Parity with Python: each case written by scripts/export_reference.py (from the
// installed torch, at test time) is rebuilt in C++ and compared output, weights,
// gradients and initialisation. Prints how many cases are bitwise equal.

#include <mha/multihead_attention.h>
#include <torch/serialize.h>

#include <fstream>
#include <iostream>
#include <iterator>

#include "dtype_names.h"
#include "parity_report.h"
#include "reference_bundle.h"
#include "support.h"
#include "tolerances.h"

namespace {

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
  std::ifstream file(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                                std::istreambuf_iterator<char>());
  const auto top = torch::pickle_load(bytes).toGenericDict();
  return top.contains("expected_error") ? top.at("expected_error").toStringRef() : "";
}

class ReferenceParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { torch::set_num_threads(1); }  // as export_reference.py
};

TEST_P(ReferenceParity, MatchesPython) {
  const std::string path = reference_dir() + "/" + GetParam() + ".pt";
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
    report().add_raise();
    return;
  }
  {
    torch::AutoGradMode grad_mode(ref.grad);
    std::tie(out, weights) = module(query, key, value, input("key_padding_mask"), ref.need_weights,
                                    input("attn_mask"), ref.average_attn_weights, ref.is_causal);
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

  report().add(ref.dtype, ref.name, bitwise);
}

INSTANTIATE_TEST_SUITE_P(Python,
                         ReferenceParity,
                         ::testing::ValuesIn(mha::support::read_manifest(reference_dir())),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ReferenceParity);

/// The fixture must have produced the matrix; an empty run is a failure, not a pass.
TEST(ReferenceParityManifest, HasAtLeast80Cases) {
  EXPECT_GE(mha::support::read_manifest(reference_dir()).size(), 80u)
      << "run `python scripts/export_reference.py --out " << reference_dir() << "`";
}

}  // namespace
