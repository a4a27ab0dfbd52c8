// Parity with Python: each case written by scripts/export_reference.py (from the
// installed torch, at test time) is rebuilt in C++ and compared output, weights,
// gradients and initialisation. Prints how many cases are bitwise equal.

#include <mha/multihead_attention.h>
#include <torch/serialize.h>

#include <fstream>
#include <iostream>
#include <iterator>

#include "dtype_names.h"
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

/// Case names from the manifest written next to the cases.
std::vector<std::string> case_names() {
  std::vector<std::string> names;
  std::ifstream manifest(reference_dir() + "/manifest.txt");
  for (std::string line; std::getline(manifest, line);) {
    if (!line.empty() && line[0] != '#') names.push_back(line);
  }
  return names;
}

/// Counts of cases compared bit for bit, per dtype, printed after the suite.
struct BitwiseTally {
  std::map<std::string, std::pair<int, int>> per_dtype;  // dtype -> (bitwise, total)
  std::vector<std::string> not_bitwise;
  int raises = 0;  // cases where Python raised and mha raised too
};
BitwiseTally& tally() {
  static BitwiseTally t;
  return t;
}

class BitwiseReport : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const auto& [dtype, counts] : tally().per_dtype) {
      std::cout << "parity: " << counts.first << " of " << counts.second << " " << dtype
                << " cases bitwise equal to Python (output, weights, gradients)\n";
    }
    if (tally().raises > 0) {
      std::cout << "parity: " << tally().raises << " cases raise, as they do in Python\n";
    }
    if (!tally().not_bitwise.empty()) {
      std::cout << "parity: not bitwise (within tolerance):";
      for (const auto& name : tally().not_bitwise) std::cout << " " << name;
      std::cout << "\n";
    }
  }
};
const auto* const kReport = ::testing::AddGlobalTestEnvironment(new BitwiseReport);

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
    tally().raises += 1;
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

  auto& counts = tally().per_dtype[ref.dtype];
  counts.second += 1;
  counts.first += bitwise ? 1 : 0;
  if (!bitwise) tally().not_bitwise.push_back(ref.name);
}

INSTANTIATE_TEST_SUITE_P(Python,
                         ReferenceParity,
                         ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ReferenceParity);

/// The fixture must have produced the matrix; an empty run is a failure, not a pass.
TEST(ReferenceParityManifest, HasAtLeast80Cases) {
  EXPECT_GE(case_names().size(), 80u)
      << "run `python scripts/export_reference.py --out " << reference_dir() << "`";
}

}  // namespace
