"""The benchmark's cases: seeded modules, their inputs, their FLOP counts and files.

Every case is a module built from a seed (biases and LayerNorm affines
perturbed from their zero/one initialisation, so that the cross-check covers
them), one fixed-shape input, and the case file peer_rounds reads
(bench/peer_rounds.cpp): the state_dict under "model.", the options under
"config.*", the input.
"""

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from . import seq2seq

E, HEADS, FEEDFORWARD = 512, 8, 2048


@dataclass(frozen=True)
class Case:
    """One row group: a module kind at one shape, and how many calls a round times."""
    kind: str        # "attention", "encoder_layer" or "decode"
    n: int           # batch
    length: int      # sequence length (decode: source length)
    iters: int       # calls per engine per round
    gemm_bound: bool = False  # its share of the GEMM peak is reported
    target: Optional[float] = None  # mha / each peer at most (before the floor rule)

    @property
    def name(self):
        return f"{self.kind} ({self.n}, {self.length})"

    @property
    def key(self):
        return f"{self.kind}_{self.n}x{self.length}"


KERNEL_CASES = (
    Case("attention", 1, 1, 300),
    Case("attention", 1, 16, 200, gemm_bound=True, target=0.9),
    Case("attention", 8, 128, 40, gemm_bound=True, target=0.9),
    Case("attention", 1, 1024, 15, gemm_bound=True, target=0.9),
    Case("attention", 4, 1024, 5, gemm_bound=True),
    Case("encoder_layer", 1, 128, 30, gemm_bound=True),
    Case("encoder_layer", 4, 1024, 3, gemm_bound=True, target=1.0),
)
SOURCE_LEN = 32
DECODE_CASES = (Case("decode", 1, SOURCE_LEN, 1), Case("decode", 8, SOURCE_LEN, 1))


class SelfAttention(nn.Module):
    """nn.MultiheadAttention called as self-attention, without weights."""

    def __init__(self, attn):
        super().__init__()
        self.attn = attn

    def forward(self, x):                                     # (L, N, E)
        return self.attn(x, x, x, need_weights=False)[0]      # (L, N, E)


def _perturb(module):
    """Adds 0.1 N(0, 1) noise to every 1-D parameter (biases, norm affines)."""
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    return module


def build(case):
    """The case's Python module (eval) and its input, from seed 0."""
    torch.manual_seed(0)
    if case.kind == "attention":
        module = SelfAttention(_perturb(nn.MultiheadAttention(E, HEADS)))
        x = torch.randn(case.length, case.n, E)               # (L, N, E)
    else:
        module = _perturb(nn.TransformerEncoderLayer(E, HEADS, FEEDFORWARD, dropout=0.0,
                                                     batch_first=True))
        x = torch.randn(case.n, case.length, E)               # (N, L, E)
    return module.eval(), x


def flops(case):
    """Multiply-adds x 2 of one call: projections, scores and weighted sum, FFN."""
    tokens = case.n * case.length
    projections = 2 * tokens * E * 4 * E                      # in_proj (3E) + out_proj (E)
    attention = 2 * 2 * case.n * case.length * case.length * E
    ffn = 2 * 2 * tokens * E * FEEDFORWARD if case.kind == "encoder_layer" else 0
    return projections + attention + ffn


def write_kernel_file(case, module, x, path):
    """The case file of an attention or encoder-layer case."""
    inner = module.attn if case.kind == "attention" else module
    data = {f"model.{k}": v for k, v in inner.state_dict().items()}
    if case.kind == "attention":
        options = dict(embed_dim=E, num_heads=HEADS)
    else:
        options = dict(d_model=E, nhead=HEADS, dim_feedforward=FEEDFORWARD, batch_first=1)
    data.update({f"config.{k}": torch.tensor(v) for k, v in options.items()})
    data["input"] = x
    torch.save(data, path)


def decode_model_entries(model):
    """The seq2seq model's entries as seq2seq_model.h reads them: `model.*` and `config.*`."""
    data = {f"model.{k}": v for k, v in model.state_dict().items()}
    data.update(seq2seq.config())
    return data


def write_decode_file(model, src, tokens, path):
    """The case file of a decoding case (the format of seq2seq_model.h), Python's tokens too."""
    data = decode_model_entries(model)
    data.update(src=src, steps=torch.tensor(tokens.size(1) - 1), tokens=tokens)
    torch.save(data, path)
