"""The Marian-shaped model of the generation rows, as a Hugging Face directory.

transformers' MarianMTModel at opus-mt's size (d_model 512, 6 + 6 layers, 8
heads, FFN 2048, sinusoidal positions, scaled embeddings) with a vocabulary
of 32,000, random weights from a seed (no download), saved with
save_pretrained beside a generation_config.json as opus-mt's (bad word: the
pad token; no forced end token, so that every engine decodes the same
steps). The end token's final logit bias is a large negative number, so no
hypothesis ends early and every engine generates exactly the requested
tokens. CTranslate2 converts the same directory with its
TransformersConverter; a vocabulary of token names stands in for the
tokenizer, which a random model does not have.
"""

import torch
import transformers as T

from . import ct2_peer

VOCAB, EOS, UNK = 32000, 0, 1
PAD = VOCAB - 1            # Marian's pad token is its last; it starts the decoder
SOURCE_LEN = 32            # source tokens, the end token last
UNREACHABLE = -1e4         # final logit bias of the end token
INIT_STD = 0.2             # weights of std 0.2 rather than 0.02: tokens that vary


def config():
    """The MarianConfig of the model."""
    return T.MarianConfig(vocab_size=VOCAB, d_model=512, encoder_layers=6, decoder_layers=6,
                          encoder_attention_heads=8, decoder_attention_heads=8,
                          encoder_ffn_dim=2048, decoder_ffn_dim=2048,
                          max_position_embeddings=512, scale_embedding=True,
                          pad_token_id=PAD, decoder_start_token_id=PAD, eos_token_id=EOS,
                          forced_eos_token_id=None, init_std=INIT_STD)


@torch.no_grad()
def write(directory, seed=0):
    """Saves the seeded model to `directory`; returns it (eval)."""
    torch.manual_seed(seed)
    model = T.MarianMTModel(config()).eval()
    model.model.shared.weight[PAD] = 0  # the pad row: Marian's zero start embedding
    model.final_logits_bias[0, EOS] = UNREACHABLE
    model.generation_config.bad_words_ids = [[PAD]]
    model.generation_config.forced_eos_token_id = None
    model.save_pretrained(directory)
    return model


def sources(n, seed=1):
    """(N, SOURCE_LEN) source ids, none special but the end token last."""
    ids = torch.randint(2, PAD, (n, SOURCE_LEN), generator=torch.Generator().manual_seed(seed))
    ids[:, -1] = EOS
    return ids


def step_bytes(model):
    """Bytes of the weights one decoder step reads: the decoder's layers and the LM head."""
    decoder = sum(p.numel() for n, p in model.model.decoder.named_parameters()
                  if "embed" not in n)
    return 4 * (decoder + model.lm_head.weight.numel())


def token_names():
    """The token names of ids 0 .. VOCAB - 1 (what a tokenizer's get_vocab gives)."""
    names = {EOS: "</s>", UNK: "<unk>", PAD: "<pad>"}
    return [names.get(i, f"t{i}") for i in range(VOCAB)]


def convert_for_ct2(directory, out):
    """CTranslate2's TransformersConverter on `directory`, into `out` (float32)."""
    return ct2_peer.convert_hf(directory, out, token_names(), eos_token="</s>", unk_token="<unk>")


def names_of(ids):
    """Token names of each row of `ids` (N, L)."""
    names = token_names()
    return [[names[i] for i in row] for row in ids.tolist()]


def ids_of(rows):
    """(N, T) ids of token-name rows of one length."""
    index = {name: i for i, name in enumerate(token_names())}
    return torch.tensor([[index[t] for t in row] for row in rows])


def ct2_call(ct2_dir, threads, src, beams, steps):
    """CTranslate2's Translator on the sources `src` (N, S): a call returning
    (N, 1 + steps) ids, the decoder start token first, as transformers' generate
    returns them."""
    import ctranslate2

    translator = ctranslate2.Translator(ct2_dir, device="cpu", intra_threads=threads,
                                        inter_threads=1)
    names = names_of(src)
    start = torch.full((src.size(0), 1), PAD)

    def call():
        results = translator.translate_batch(names, beam_size=beams, max_decoding_length=steps)
        return torch.cat([start, ids_of([r.hypotheses[0] for r in results])], 1)

    return call
