#!/usr/bin/env python3
"""Train a small nn.Transformer on sequence reversal and write Python's greedy decoding.

For mha's cached Transformer decoding (TransformerDecoder::forward_cached):
each case trains a seq2seq model (token and position embeddings, a small
nn.Transformer with dropout 0, a Linear to the vocabulary) for a few hundred
Adam steps on reversing random digit sequences (seconds on one thread), then
runs Python's own greedy loop, which re-runs the decoder on the whole prefix
at every step:

    memory = transformer.encoder(embed(src), src_key_padding_mask=pad)
    for step: out = transformer.decoder(embed(ys), memory, tgt_mask=causal,
                                        tgt_is_causal=True, memory_key_padding_mask=pad)
              logits = out_proj(out[last position]); ys += argmax(logits)

Saved with torch.save as one flat dict of tensors (mha::read_state_dict reads
it): the model's state_dict under "model.", the options under "config.*"
(0-d int64), and "src" (N, S) int64, "src_key_padding_mask" (N, S) bool
(true = padding), "tokens" (N, 1 + STEPS) int64 (BOS, then the greedy
tokens), "logits" (STEPS, N, VOCAB) float32 (step i's logits of the last
position, from the prefix of i + 1 tokens).

Usage: export_seq2seq_reference.py --out DIR   # one .pt per case + manifest.txt
"""

import argparse
import os
import time
import warnings
from dataclasses import dataclass

import torch
from torch import nn

DIGITS = 10
BOS = DIGITS          # the decoder's start token
PAD = DIGITS + 1      # source padding
VOCAB = DIGITS + 2
SRC_LEN = 8
STEPS = SRC_LEN + 2   # the reversed source, then whatever the model says
MAX_LEN = 16          # position embeddings
TRAIN_BATCH = 32


@dataclass(frozen=True)
class Case:
    name: str
    norm_first: bool = False
    activation: str = "relu"
    batch_first: bool = False
    padded: bool = False  # variable-length sources: memory_key_padding_mask
    d_model: int = 32
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 64
    train_steps: int = 100
    batch: int = 5


CASES = (
    Case("Reverse"),
    Case("ReverseNormFirstGeluBatchFirst", norm_first=True, activation="gelu",
         batch_first=True),
    Case("ReversePadded", padded=True, batch_first=True),
)


class Seq2Seq(nn.Module):
    """Embeddings, nn.Transformer, projection to the vocabulary."""

    def __init__(self, c: Case):
        super().__init__()
        self.batch_first = c.batch_first
        self.embed = nn.Embedding(VOCAB, c.d_model)
        self.pos = nn.Embedding(MAX_LEN, c.d_model)
        self.transformer = nn.Transformer(
            c.d_model, c.nhead, c.num_layers, c.num_layers, c.dim_feedforward, dropout=0.0,
            activation=c.activation, batch_first=c.batch_first, norm_first=c.norm_first)
        self.out = nn.Linear(c.d_model, VOCAB)

    def inputs(self, ids):
        """(N, L) ids -> (N, L, E) or (L, N, E)."""
        x = self.embed(ids) + self.pos(torch.arange(ids.size(1)))
        return x if self.batch_first else x.transpose(0, 1)

    def logits(self, out):
        """Decoder output -> (N, L, VOCAB)."""
        return self.out(out if self.batch_first else out.transpose(0, 1))

    def forward(self, src, tgt, pad):
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1))
        out = self.transformer(self.inputs(src), self.inputs(tgt), tgt_mask=causal,
                               src_key_padding_mask=pad, memory_key_padding_mask=pad,
                               tgt_is_causal=True)
        return self.logits(out)


def batch_of(n, padded, generator):
    """Sources (N, SRC_LEN), their padding (N, SRC_LEN) or None, decoder targets (N, STEPS)."""
    src = torch.randint(DIGITS, (n, SRC_LEN), generator=generator)
    lengths = (torch.randint(SRC_LEN // 2, SRC_LEN + 1, (n,), generator=generator) if padded
               else torch.full((n,), SRC_LEN))
    pad = torch.arange(SRC_LEN).unsqueeze(0) >= lengths.unsqueeze(1)  # (N, S)
    src = src.masked_fill(pad, PAD)
    tgt = torch.full((n, STEPS), PAD)
    for i in range(n):
        tgt[i, : lengths[i]] = src[i, : lengths[i]].flip(0)
    return src, (pad if padded else None), tgt


def train(model, c: Case):
    generator = torch.Generator().manual_seed(1)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(c.train_steps):
        src, pad, tgt = batch_of(TRAIN_BATCH, c.padded, generator)
        ys = torch.cat([torch.full((TRAIN_BATCH, 1), BOS), tgt[:, :-1]], 1)
        loss = nn.functional.cross_entropy(model(src, ys, pad).reshape(-1, VOCAB),
                                           tgt.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


@torch.no_grad()
def greedy(model, src, pad):
    """Python's greedy loop: the decoder re-run on the whole prefix at each step."""
    model.eval()
    t = model.transformer
    memory = t.encoder(model.inputs(src), src_key_padding_mask=pad)
    ys = torch.full((src.size(0), 1), BOS)
    step_logits = []
    for _ in range(STEPS):
        causal = nn.Transformer.generate_square_subsequent_mask(ys.size(1))
        out = t.decoder(model.inputs(ys), memory, tgt_mask=causal, tgt_is_causal=True,
                        memory_key_padding_mask=pad)
        logits = model.logits(out)[:, -1]  # (N, VOCAB)
        step_logits.append(logits)
        ys = torch.cat([ys, logits.argmax(-1, keepdim=True)], 1)
    return ys, torch.stack(step_logits)


def export(c: Case, out_dir):
    torch.manual_seed(0)
    model = Seq2Seq(c)
    loss = train(model, c)
    src, pad, tgt = batch_of(c.batch, c.padded, torch.Generator().manual_seed(2))
    tokens, logits = greedy(model, src, pad)
    config = dict(d_model=c.d_model, nhead=c.nhead, num_layers=c.num_layers,
                  dim_feedforward=c.dim_feedforward, vocab=VOCAB, max_len=MAX_LEN,
                  bos=BOS, norm_first=c.norm_first, gelu=c.activation == "gelu",
                  batch_first=c.batch_first)
    data = {f"model.{k}": v for k, v in model.state_dict().items()}
    data.update({f"config.{k}": torch.tensor(int(v)) for k, v in config.items()})
    data.update(src=src, tokens=tokens, logits=logits)
    if pad is not None:
        data["src_key_padding_mask"] = pad
    torch.save(data, os.path.join(out_dir, c.name + ".pt"))
    digits = tgt != PAD  # the reversed source's positions
    reversed_ok = int(((tokens[:, 1:] == tgt) | ~digits).all(1).sum())
    return loss, reversed_ok


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory for the case files")
    args = parser.parse_args()
    torch.set_num_threads(1)  # deterministic, as the C++ test runs
    # nn.Transformer's notes on nested tensors, which it decides itself
    warnings.filterwarnings("ignore", category=UserWarning)
    os.makedirs(args.out, exist_ok=True)
    names = []
    for c in CASES:
        start = time.perf_counter()
        loss, ok = export(c, args.out)
        print(f"{c.name}: trained {c.train_steps} steps in {time.perf_counter() - start:.1f} s, "
              f"loss {loss:.3f}, {ok}/{c.batch} sources reversed exactly")
        names.append(c.name)
    with open(os.path.join(args.out, "manifest.txt"), "w") as f:
        f.write("\n".join(names) + "\n")


if __name__ == "__main__":
    main()
