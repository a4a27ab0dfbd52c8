// Smallest use of the installed or embedded mha: one forward, shapes checked.

#include <mha/multihead_attention.h>

#include <iostream>

int main() {
  mha::MultiheadAttention attn(mha::MultiheadAttentionOptions(16, 4).batch_first(true));
  const auto x = torch::randn({2, 3, 16});    // (N, L, E)
  const auto [out, weights] = attn(x, x, x);  // (N, L, E), (N, L, L)
  const bool ok = out.sizes() == x.sizes() && weights.size(2) == 3;
  std::cout << "mha consumer: " << attn << (ok ? " ok" : " WRONG SHAPES") << "\n";
  return ok ? 0 : 1;
}
