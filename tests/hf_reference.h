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

}  // namespace mha::test
