#!/usr/bin/env python3
"""Write the Python references for mha's incremental decoding tests (KVCache).

For each case, torch.nn.MultiheadAttention (fast path disabled, so Python runs
its SDPA path) computes the full-sequence output that decoding must reproduce
position by position:

- "self" cases: forward(x, x, x, key_padding_mask, need_weights=False,
  attn_mask=triu(ones(L, L), 1).bool()) on the whole sequence (left-padded rows
  marked in key_padding_mask);
- "static" cases (cross-attention): forward(x, memory, memory_value,
  memory_key_padding_mask, need_weights=False).

Each case also holds the output on the sequences after a beam reorder
(positions before `reorder_step` taken from batch entries `reorder_index`, the
later ones fresh), and, for some, the averaged weights (need_weights=True).
Saved with torch.save as a plain dict of plain values and CPU tensors; C++
reads it with torch::pickle_load:

    {"name": str, "kind": "self" | "static", "dtype": "float32" | "float64",
     "options": {embed_dim, num_heads, bias, add_bias_kv, add_zero_attn, kdim, vdim,
                 batch_first},
     "state_dict": {...},
     "inputs": {x[, key_padding_mask][, memory, memory_value][, x_reordered,
                key_padding_mask_reordered]},
     "expected": {output[, weights][, output_reordered]},
     "reorder_step": int, "reorder_index": int64 tensor (absent when unbatched)}

Usage: export_decoding_reference.py --out DIR
"""

import argparse
import os
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
from torch import nn

SEQ_LEN = 48       # 37-token prompt, then single steps
REORDER_STEP = 41  # positions decoded before the beam reorder


@dataclass(frozen=True)
class Case:
    name: str
    kind: str = "self"
    embed_dim: int = 32
    num_heads: int = 4
    bias: bool = True
    add_bias_kv: bool = False
    add_zero_attn: bool = False
    kdim: Optional[int] = None
    vdim: Optional[int] = None
    batch_first: bool = False
    dtype: torch.dtype = torch.float32
    pads: Optional[Tuple[int, ...]] = (0, 3, 11)  # left padding per batch entry; None: unbatched
    reorder_index: Tuple[int, ...] = (2, 0, 0, 1)
    mem_len: int = 23
    need_weights: bool = False


CASES = [
    Case("self_f32_seq_first_padded"),
    Case("self_f32_batch_first_nobias", batch_first=True, bias=False, pads=(0, 7),
         reorder_index=(1, 1, 0)),
    Case("self_f32_bias_kv_zero_attn", add_bias_kv=True, add_zero_attn=True, need_weights=True),
    Case("self_f32_zero_attn_h2", embed_dim=16, num_heads=2, add_zero_attn=True, batch_first=True,
         pads=(5,), reorder_index=(0, 0)),
    Case("self_f32_unbatched", pads=None),
    Case("self_f64_bias_kv_batch_first", dtype=torch.float64, add_bias_kv=True, batch_first=True,
         pads=(4, 0), reorder_index=(1, 0, 1)),
    Case("self_f64_seq_first_padded", dtype=torch.float64),
    Case("static_f32_kdim_vdim", kind="static", kdim=12, vdim=20, batch_first=True),
    Case("static_f32_nobias_unbatched", kind="static", bias=False, pads=None),
    Case("static_f64_bias_kv_zero_attn", kind="static", dtype=torch.float64, add_bias_kv=True,
         add_zero_attn=True, need_weights=True),
]


def batch_dim(case):
    return 0 if case.batch_first else 1


def rand_seq(case, length, bsz, features):
    if case.pads is None:
        return torch.randn(length, features, dtype=case.dtype)
    shape = (bsz, length, features) if case.batch_first else (length, bsz, features)
    return torch.randn(shape, dtype=case.dtype)


def left_padding_mask(case, length):
    if case.pads is None:
        return None
    mask = torch.zeros(len(case.pads), length, dtype=torch.bool)
    for b, pad in enumerate(case.pads):
        mask[b, :pad] = True
    return mask


def reordered(case, x, fresh):
    """Positions < REORDER_STEP from batch entries reorder_index, the rest from `fresh`."""
    index = torch.tensor(case.reorder_index)
    picked = x.index_select(batch_dim(case), index)
    seq = 1 if case.batch_first else 0
    return torch.cat([picked.narrow(seq, 0, REORDER_STEP),
                      fresh.narrow(seq, REORDER_STEP, SEQ_LEN - REORDER_STEP)], dim=seq)


def run(module, case, x, kpm, memory, memory_value, need_weights=False):
    if case.kind == "self":
        causal = torch.triu(torch.ones(SEQ_LEN, SEQ_LEN), 1).bool()
        return module(x, x, x, key_padding_mask=kpm, need_weights=need_weights,
                      attn_mask=causal)
    return module(x, memory, memory_value, key_padding_mask=kpm, need_weights=need_weights)


def export(case, seed):
    torch.manual_seed(seed)
    module = nn.MultiheadAttention(case.embed_dim, case.num_heads, bias=case.bias,
                                   add_bias_kv=case.add_bias_kv, add_zero_attn=case.add_zero_attn,
                                   kdim=case.kdim, vdim=case.vdim, batch_first=case.batch_first)
    module = module.to(case.dtype).eval()
    with torch.no_grad():
        for p in module.parameters():  # nonzero biases, so that every term is exercised
            p.copy_(torch.randn_like(p) * 0.3)
    bsz = len(case.pads) if case.pads is not None else 1
    x = rand_seq(case, SEQ_LEN, bsz, case.embed_dim)
    inputs = {"x": x}
    memory = memory_value = None
    if case.kind == "static":
        memory = rand_seq(case, case.mem_len, bsz, case.kdim or case.embed_dim)
        memory_value = rand_seq(case, case.mem_len, bsz, case.vdim or case.embed_dim)
        inputs.update(memory=memory, memory_value=memory_value)
    kpm = left_padding_mask(case, case.mem_len if case.kind == "static" else SEQ_LEN)
    if kpm is not None:
        inputs["key_padding_mask"] = kpm
    with torch.inference_mode():
        expected = {"output": run(module, case, x, kpm, memory, memory_value)[0]}
        if case.need_weights:
            expected["weights"] = run(module, case, x, kpm, memory, memory_value, True)[1]
        result = {"name": case.name, "kind": case.kind, "dtype": str(case.dtype).split(".")[1],
                  "reorder_step": REORDER_STEP}
        if case.pads is not None:
            index = torch.tensor(case.reorder_index)
            fresh = rand_seq(case, SEQ_LEN, len(case.reorder_index), case.embed_dim)
            x2 = reordered(case, x, fresh)
            kpm2 = kpm.index_select(0, index)
            if case.kind == "static":
                memory, memory_value = (t.index_select(batch_dim(case), index)
                                        for t in (memory, memory_value))
            expected["output_reordered"] = run(module, case, x2, kpm2, memory, memory_value)[0]
            inputs.update(x_reordered=x2, key_padding_mask_reordered=kpm2)
            result["reorder_index"] = index
    result["options"] = {"embed_dim": case.embed_dim, "num_heads": case.num_heads,
                         "bias": case.bias, "add_bias_kv": case.add_bias_kv,
                         "add_zero_attn": case.add_zero_attn, "kdim": case.kdim,
                         "vdim": case.vdim, "batch_first": case.batch_first}
    result["state_dict"] = {k: v.detach().clone() for k, v in module.state_dict().items()}
    result["inputs"] = {k: v.clone() for k, v in inputs.items()}
    result["expected"] = {k: v.clone() for k, v in expected.items()}
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory for <case>.pt and manifest.txt")
    args = parser.parse_args()
    torch.backends.mha.set_fastpath_enabled(False)
    os.makedirs(args.out, exist_ok=True)
    for seed, case in enumerate(CASES):
        torch.save(export(case, seed), os.path.join(args.out, case.name + ".pt"))
    with open(os.path.join(args.out, "manifest.txt"), "w") as f:
        f.write("".join(case.name + "\n" for case in CASES))
    print(f"wrote {len(CASES)} decoding references to {args.out}")


if __name__ == "__main__":
    main()
