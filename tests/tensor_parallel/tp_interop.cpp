// The C++ rank 0 of tests/tensor_parallel/tp_interop.py: joins one Gloo group
// with a Python rank 1 (torch.distributed), loads the whole checkpoint Python
// wrote, computes one tensor-parallel forward with it and checks the output
// against nn.MultiheadAttention's, then gathers the whole module and writes it
// for Python to load. Usage: mha_tp_interop DIR (whole.pt, io.pt in; gathered.pt out).

#include <torch/torch.h>

#include <chrono>
#include <iostream>
#include <string>

#include "mha/state_dict.h"
#include "mha/tensor_parallel.h"
#include "tolerances.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " DIR" << std::endl;
    return 2;
  }
  const std::string dir = argv[1];
  const auto group = mha::process_group_from_env(
      mha::ProcessGroupFromEnvOptions().timeout(std::chrono::seconds(30)));
  mha::TensorParallelMultiheadAttention tp(mha::MultiheadAttentionOptions(16, 4), group);
  tp->load(dir + "/whole.pt");
  const auto io = mha::read_state_dict(dir + "/io.pt");
  const auto x = io.at("x"), expected = io.at("expected");
  torch::NoGradGuard no_grad;
  const auto out = std::get<0>(tp(x, x, x, torch::Tensor(), /*need_weights=*/false));
  const auto tol = mha::support::parity_tolerance(torch::kFloat32);
  const double max_diff = (out - expected).abs().max().item<double>();
  const bool close = torch::allclose(out, expected, tol.rtol, tol.atol);
  std::cout << "C++ rank " << group->getRank()
            << ": max |out - nn.MultiheadAttention| = " << max_diff << (close ? " PASS" : " FAIL")
            << std::endl;
  tp->save(dir + "/gathered.pt");  // collective with the Python rank
  return close ? 0 : 1;
}
