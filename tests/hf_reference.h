#pragma once

// The Hugging Face model directories and transformers' outputs that
// scripts/export_hf_reference.py writes at test time (CTest fixture
// hf_reference) into MHA_HF_REFERENCE_DIR, as the tests read them.

#include <gtest/gtest.h>
#include <mha/state_dict.h>
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>

namespace mha::test {

/// The export's `MAGIC`: a reference without it is from an older export.
constexpr int64_t kHfReferenceMagic = 20261202;

/// The directory of the reference model `name` ("bert", "marian", ...).
inline std::string hf_model_dir(const std::string& name) {
  return std::string(MHA_HF_REFERENCE_DIR) + "/" + name;
}

/// The tensors transformers wrote for model `name` (its mha_reference.pt).
inline std::map<std::string, torch::Tensor> hf_reference(const std::string& name) {
  auto values = mha::read_state_dict(hf_model_dir(name) + "/mha_reference.pt");
  EXPECT_EQ(values.at("magic").item<int64_t>(), kHfReferenceMagic)
      << "stale reference; run scripts/export_hf_reference.py";
  return values;
}

/// A token check means something only when transformers' choices were not
/// near ties: the reference's smallest margin `name` (in the scores' units)
/// is above `floor`, itself above mha's agreement with transformers' logits
/// (within 1.7e-6).
inline void expect_margin_means_something(const std::map<std::string, torch::Tensor>& values,
                                          const std::string& name,
                                          double floor) {
  const double margin = values.at(name).item<double>();
  EXPECT_GT(margin, floor) << name << ": a near tie in the reference, the token check means little";
  ::testing::Test::RecordProperty("smallest_" + name, ::testing::PrintToString(margin));
}

}  // namespace mha::test
