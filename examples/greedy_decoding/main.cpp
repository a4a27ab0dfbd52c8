// Greedy decoding with mha::KVCache: a tiny seeded model (token and position
// embeddings -> causal self-attention -> projection to the vocabulary) picks
// the most likely next token, one step at a time, from a batch of prompts.
// Every step is checked against recomputing `forward` on the whole prefix with
// the explicit causal mask; exits 1 on any difference beyond float32 rounding.
// On a machine shared with other work, run it with OMP_WAIT_POLICY=PASSIVE
// (docs/semantics.md, "Prepacked weights and threads"): the torch wheel's OpenMP threads spin
// otherwise.

#include <mha/kv_cache.h>
#include <mha/multihead_attention.h>
#include <torch/torch.h>

#include <iostream>

namespace {

constexpr int64_t kVocab = 50, kEmbed = 32, kHeads = 4, kMaxLen = 24;

struct TinyDecoder {
  torch::nn::Embedding tokens{kVocab, kEmbed};
  torch::nn::Embedding positions{kMaxLen, kEmbed};
  mha::MultiheadAttention attn{mha::MultiheadAttentionOptions(kEmbed, kHeads).batch_first(true)};
  torch::nn::Linear to_vocab{kEmbed, kVocab};

  /// (N, L) token ids at positions [start, start + L) -> (N, L, E) inputs.
  torch::Tensor embed(const torch::Tensor& ids, int64_t start) {
    const auto pos = torch::arange(start, start + ids.size(1));
    return tokens(ids) + positions(pos).unsqueeze(0);
  }
  /// Next tokens (N) from the attention output's last position.
  torch::Tensor next(const torch::Tensor& attended, const torch::Tensor& x) {
    return to_vocab(x + attended).select(1, -1).argmax(-1);
  }
};

}  // namespace

int main() {
  torch::manual_seed(0);
  torch::NoGradGuard no_grad;
  TinyDecoder model;
  model.attn->eval();
  torch::Tensor ids = torch::randint(kVocab, {2, 5});  // (N, prompt) prompts
  auto cache = mha::KVCache::self_attention(kMaxLen);

  torch::Tensor x = model.embed(ids, 0);  // (N, 5, E)
  torch::Tensor out = std::get<0>(model.attn->forward_cached(x, x, x, cache));
  double max_diff = 0.0;
  while (ids.size(1) < kMaxLen) {
    const torch::Tensor token = model.next(out, x);  // (N)
    // Reference: the whole prefix again, with the explicit causal mask.
    const int64_t len = ids.size(1);
    const auto causal = torch::ones({len, len}, torch::kBool).triu(1);
    const auto full_x = model.embed(ids, 0);
    const auto full = std::get<0>(model.attn->forward(full_x, full_x, full_x, {}, false, causal));
    max_diff =
        std::max(max_diff,
                 (full.narrow(1, len - out.size(1), out.size(1)) - out).abs().max().item<double>());
    if (!torch::equal(model.next(full, full_x), token) || max_diff > 1e-5) {
      std::cerr << "step " << len << ": cached decoding differs from the full forward (max |diff| "
                << max_diff << ")\n";
      return 1;
    }
    ids = torch::cat({ids, token.unsqueeze(1)}, 1);
    x = model.embed(token.unsqueeze(1), len);  // (N, 1, E): only the new token
    if (ids.size(1) < kMaxLen) out = std::get<0>(model.attn->forward_cached(x, x, x, cache));
  }
  std::cout << "greedy decoding of " << ids.size(0) << " sequences to " << kMaxLen
            << " tokens: cache length " << cache.length() << ", same tokens as the full forward "
            << "at every step, max |diff| " << max_diff << "\n"
            << ids << "\n";
  return 0;
}
