// Runs one mha::MultiheadAttention on random input and prints what it returns.

#include <mha/multihead_attention.h>
#include <torch/torch.h>

#include <iostream>

int main() {
  torch::manual_seed(0);
  mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(8, 2).batch_first(true));
  attn->eval();
  const auto x = torch::randn({2, 5, 8});  // (N, L, E)
  auto [out, weights] = attn(x, x, x);     // (N, L, E), (N, L, L)
  std::cout << attn << "\n"
            << "output " << out.sizes() << "\n"
            << out[0] << "\nweights " << weights.sizes() << "\n"
            << weights[0] << "\n";
  return 0;
}
