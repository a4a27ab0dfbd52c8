"""The GPT-2-shaped causal LM of the generation rows, as a Hugging Face directory.

transformers' GPT2LMHeadModel at GPT-2 small's size (n_embd 768, 12 layers,
12 heads, vocabulary 50,257, 1,024 positions, the LM head tied to the token
embeddings), random weights from a seed (no download), saved with
save_pretrained. Its generation_config.json asks for `min_new_tokens` equal to
the tokens generated (as `marian`'s unreachable end token does for the
seq2seq rows), so that every engine decodes the same steps:
transformers and mha suppress the end token until then, CTranslate2 by its
`min_length`. CTranslate2 converts the same directory with its
TransformersConverter into a Generator; token names stand in for the
tokenizer, which a random model does not have.
"""

import torch
import transformers as T

from . import ct2_peer

VOCAB = 50257
EOS = VOCAB - 1            # GPT-2's <|endoftext|>: its start, end and unknown token
PROMPT_LEN = 32            # prompt tokens, none special
INIT_STD = 0.2             # weights of std 0.2 rather than 0.02: tokens that vary


def config():
    """The GPT2Config of the model."""
    return T.GPT2Config(vocab_size=VOCAB, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
                        bos_token_id=EOS, eos_token_id=EOS, initializer_range=INIT_STD)


@torch.no_grad()
def write(directory, new_tokens, seed=0):
    """Saves the seeded model to `directory`, its generation config asking for
    at least `new_tokens` tokens; returns it (eval)."""
    torch.manual_seed(seed)
    model = T.GPT2LMHeadModel(config()).eval()
    model.generation_config.pad_token_id = EOS
    model.generation_config.min_new_tokens = new_tokens
    model.save_pretrained(directory)
    return model


def sources(n, seed=1):
    """(N, PROMPT_LEN) prompt ids, none special."""
    return torch.randint(0, EOS, (n, PROMPT_LEN), generator=torch.Generator().manual_seed(seed))


def step_bytes(model):
    """Bytes of the weights one step reads: the layers, the final norm and the LM head."""
    layers = sum(p.numel() for n, p in model.transformer.named_parameters()
                 if not n.startswith(("wte", "wpe")))
    return 4 * (layers + model.lm_head.weight.numel())


def token_names():
    """The token names of ids 0 .. VOCAB - 1 (what a tokenizer's get_vocab gives)."""
    return [f"t{i}" for i in range(EOS)] + ["<|endoftext|>"]


def convert_for_ct2(directory, out):
    """CTranslate2's TransformersConverter on `directory`, into `out` (float32)."""
    end = token_names()[EOS]
    return ct2_peer.convert_hf(directory, out, token_names(), bos_token=end, eos_token=end,
                               unk_token=end)


def ct2_call(ct2_dir, threads, src, beams, steps):
    """CTranslate2's Generator on the prompts `src` (N, L): a call returning
    (N, L + steps) ids, prompts first, as transformers' generate returns them."""
    import ctranslate2

    generator = ctranslate2.Generator(ct2_dir, device="cpu", intra_threads=threads,
                                      inter_threads=1)
    names = token_names()
    prompts = [[names[i] for i in row] for row in src.tolist()]
    index = {name: i for i, name in enumerate(names)}

    def call():
        results = generator.generate_batch(prompts, beam_size=beams, max_length=steps,
                                           min_length=steps, include_prompt_in_result=False)
        new = torch.tensor([[index[t] for t in r.sequences[0]] for r in results])
        return torch.cat([src, new], 1)

    return call
