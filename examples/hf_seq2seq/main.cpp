// Greedy decoding of a Marian/BART-style Hugging Face model directory (marian,
// bart, mbart) as one module: mha::load_hf_model returns a mha::Seq2SeqLM
// (embeddings, stacks, tied LM head, final_logits_bias); the encoder runs
// once, then one decoder position per step through its cache, with the rules
// transformers' generate (do_sample=False, num_beams=1) takes from
// generation_config.json (else config.json): decoder_start_token_id,
// eos_token_id, forced_eos_token_id, min_new_tokens, max_new_tokens (or
// max_length), pad_token_id after the end, and single-token bad_words_ids.
// Prints the tokens; given transformers' (scripts/export_hf_reference.py
// writes mha_reference.pt), exits 1 unless they are the same.
// Usage: mha_hf_seq2seq MODEL_DIR [REFERENCE.pt]

#include <mha/hf_models.h>
#include <mha/state_dict.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

namespace {

/// generate's rules, from generation_config.json where it has them.
struct GenerationRules {
  int64_t decoder_start = 0;
  std::vector<int64_t> eos;
  int64_t forced_eos = -1;  // -1: none
  int64_t pad = 0;
  int64_t min_new_tokens = 0;
  int64_t max_new_tokens = 20;
  std::vector<int64_t> bad_tokens;
};

GenerationRules rules(const mha::HfCheckpoint& checkpoint) {
  const mha::HfConfig& c = checkpoint.config;
  const mha::HfConfig& g = checkpoint.generation_config ? *checkpoint.generation_config : c;
  auto integer = [&](const std::string& field, int64_t fallback) {
    return g.integer(field, c.integer(field, fallback));
  };
  GenerationRules r;
  r.decoder_start = integer("decoder_start_token_id", c.integer("bos_token_id", 0));
  r.eos = g.has("eos_token_id") ? g.integers("eos_token_id") : c.integers("eos_token_id");
  r.forced_eos = integer("forced_eos_token_id", -1);
  r.pad = integer("pad_token_id", 0);
  r.min_new_tokens = g.has("min_new_tokens") ? g.integer("min_new_tokens")
                                             : std::max<int64_t>(integer("min_length", 0) - 1, 0);
  // For an encoder-decoder model, max_length counts the decoder start token.
  r.max_new_tokens =
      g.has("max_new_tokens") ? g.integer("max_new_tokens") : integer("max_length", 20) - 1;
  // Marian's configs ban the pad token this way. Only single-token bad words
  // here; longer ones depend on the tokens before them.
  for (const auto& words : (g.has("bad_words_ids") ? g : c).integer_lists("bad_words_ids")) {
    if (words.size() == 1) r.bad_tokens.push_back(words.front());
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR [REFERENCE.pt]\n";
    return 2;
  }
  torch::NoGradGuard no_grad;
  const mha::HfCheckpoint checkpoint = mha::read_hf_checkpoint(argv[1]);
  mha::Seq2SeqLM model = mha::load_hf_model(checkpoint).as<mha::Seq2SeqLM>();
  const GenerationRules r = rules(checkpoint);

  std::map<std::string, torch::Tensor> reference;
  const int64_t pad = r.pad;
  torch::Tensor input_ids =
      torch::tensor(std::vector<int64_t>{14, 14, 15, 31, 22, 28, 14, 50, 26, pad, pad, pad})
          .view({2, 6});  // (N, S)
  torch::Tensor attention_mask = input_ids.ne(r.pad).to(torch::kLong);
  if (argc == 3) {
    reference = mha::read_state_dict(argv[2]);
    input_ids = reference.at("input_ids");
    attention_mask = reference.at("attention_mask");
  }
  const int64_t batch = input_ids.size(0);

  const torch::Tensor memory = model->encode(input_ids, attention_mask);  // (N, S, E)
  auto cache = model->make_cache();
  torch::Tensor tokens = torch::full({batch, 1}, r.decoder_start, torch::kLong);  // (N, 1)
  torch::Tensor finished = torch::zeros({batch}, torch::kBool);
  const float minus_inf = -std::numeric_limits<float>::infinity();
  for (int64_t step = 0; step < r.max_new_tokens && !finished.all().item<bool>(); ++step) {
    const auto last = tokens.narrow(1, step, 1);  // (N, 1)
    auto logits =
        model->decode_cached(last, step == 0 ? memory : torch::Tensor(), cache,
                             attention_mask)
            .squeeze(1);  // (N, V)
    for (int64_t id : r.bad_tokens) logits.select(1, id).fill_(minus_inf);
    if (step < r.min_new_tokens) {
      for (int64_t id : r.eos) logits.select(1, id).fill_(minus_inf);
    }
    if (r.forced_eos >= 0 && step == r.max_new_tokens - 1) {
      logits.fill_(minus_inf);
      logits.select(1, r.forced_eos).fill_(0.0);
    }
    auto next = logits.argmax(/*dim=*/1);  // (N)
    next = torch::where(finished, torch::full_like(next, r.pad), next);
    for (int64_t id : r.eos) finished = finished | next.eq(id);
    tokens = torch::cat({tokens, next.unsqueeze(1)}, /*dim=*/1);
  }
  std::cout << checkpoint.model_type << " greedy tokens (decoder start first):\n" << tokens << "\n";
  if (reference.empty()) {
    return 0;
  }
  // transformers' tokens, with the padding after the end written as -1.
  auto expected = reference.at("generated");
  auto ours = tokens.masked_fill(tokens.eq(r.pad), -1);
  ours.select(1, 0).fill_(r.decoder_start);
  const bool same = ours.sizes() == expected.sizes() && torch::equal(ours, expected);
  std::cout << "tokens equal to transformers' generate: " << (same ? "yes" : "no") << "\n";
  if (!same) std::cout << "transformers' tokens:\n" << expected << "\n";
  return same ? 0 : 1;
}
