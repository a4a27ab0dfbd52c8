"""The seeded seq2seq model of the decoding rows and Python's greedy loop.

The model of scripts/export_seq2seq_reference.py at a larger size: token and
position embeddings (added, not scaled), nn.Transformer (post-norm, ReLU,
dropout 0, batch_first), a Linear to the vocabulary; the same submodule names
and "config.*" entries, so mha's examples/seq2seq_decoding/seq2seq_model.h
loads it. Random weights from a seed; the output bias of the special tokens
(unknown, BOS, EOS) is a large negative number, so greedy decoding never ends
early and every engine generates exactly the requested number of tokens.
"""

import torch
from torch import nn

D_MODEL, NHEAD, LAYERS, FEEDFORWARD = 512, 8, 6, 2048
VOCAB = 8000
UNK, BOS, EOS = 0, 1, 2   # CTranslate2's <unk>, <s>, </s> (peers/ct2_peer.py)
MAX_LEN = 256             # position embeddings: source and decoder positions
UNREACHABLE = -1e4        # output bias of the special tokens


class Seq2Seq(nn.Module):
    """Embeddings, nn.Transformer, projection to the vocabulary."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Embedding(MAX_LEN, D_MODEL)
        self.transformer = nn.Transformer(D_MODEL, NHEAD, LAYERS, LAYERS, FEEDFORWARD,
                                          dropout=0.0, batch_first=True)
        self.out = nn.Linear(D_MODEL, VOCAB)

    def inputs(self, ids):
        """(N, L) ids at positions [0, L) -> (N, L, E)."""
        return self.embed(ids) + self.pos(torch.arange(ids.size(1)))


def make_model(seed=0):
    """The seeded model in eval mode, special tokens unreachable."""
    torch.manual_seed(seed)
    model = Seq2Seq().eval()
    with torch.no_grad():
        model.out.bias[[UNK, BOS, EOS]] = UNREACHABLE
    return model


def config():
    """The "config.*" entries seq2seq_model.h reads (0-d int64 each)."""
    values = dict(d_model=D_MODEL, nhead=NHEAD, num_layers=LAYERS, dim_feedforward=FEEDFORWARD,
                  vocab=VOCAB, max_len=MAX_LEN, bos=BOS, norm_first=0, gelu=0, batch_first=1)
    return {f"config.{k}": torch.tensor(v) for k, v in values.items()}


def sources(n, length, seed=1):
    """(N, S) source ids, none of them special."""
    return torch.randint(EOS + 1, VOCAB, (n, length), generator=torch.Generator().manual_seed(seed))


@torch.inference_mode()
def greedy(model, src, steps):
    """Python's greedy loop, the decoder re-run on the whole prefix at every step.

    Returns the tokens (N, 1 + steps), BOS first.
    """
    t = model.transformer
    memory = t.encoder(model.inputs(src))                                   # (N, S, E)
    ys = torch.full((src.size(0), 1), BOS)
    for _ in range(steps):
        causal = nn.Transformer.generate_square_subsequent_mask(ys.size(1))
        out = t.decoder(model.inputs(ys), memory, tgt_mask=causal, tgt_is_causal=True)
        logits = model.out(out[:, -1])                                      # (N, VOCAB)
        ys = torch.cat([ys, logits.argmax(-1, keepdim=True)], 1)
    return ys
