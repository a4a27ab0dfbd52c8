#!/usr/bin/env python3
"""The per-rank memory model of docs/scaling.md: the bytes a rank of
mha::TensorParallelMultiheadAttention allocates (float32, bias, no bias_k/bias_v)
when it builds its shard and when it loads it from a whole checkpoint, against
the single-process module's.

  whole layer  P = 4 (4 E^2 + 4 E)              (in_proj 3E x E, out_proj E x E, biases)
  shard(p)       = 4 (4 E^2 / p + 3 E / p + E)  (out_proj.bias is whole on every rank)
  construction   = shard(p)                     (exact_init: + one block of 2^18 floats)
  load           = shard(p)                     (the rows and columns read, before the copy)
  save           = 2 * 4 * 3 E^2, every rank    (in_proj_weight's all-gather: Gloo's flat
                                                 buffer and the received tensors)

The single process allocates P for each: its construction, and load_state_dict's
whole state dict read beside the module. p cannot exceed the number of heads H.

Usage: tp_memory_model.py [--embed-dim 2048] [--heads 16]
"""

import argparse

WORLDS = (1, 2, 4, 8, 16, 32, 64)
BLOCK_BYTES = 4 * 2**18


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--embed-dim", type=int, default=2048)
    parser.add_argument("--heads", type=int, default=16)
    args = parser.parse_args()
    e = args.embed_dim
    whole = 4 * (4 * e * e + 4 * e)
    save = 2 * 4 * 3 * e * e
    print(f"E = {e}, H = {args.heads}: the whole layer P = {whole / 1e6:.1f} MB; a save "
          f"peaks at {save / 1e6:.1f} MB ({save / whole:.2f} P) on every rank\n")
    print("| p | construction, load (MB) | x P | exact_init construction (MB) |")
    print("|---|---|---|---|")
    for p in (p for p in WORLDS if p <= args.heads):
        shard = 4 * (4 * e * e // p + 3 * e // p + e)
        print(f"| {p} | {shard / 1e6:.1f} | {shard / whole:.3f} | "
              f"{(shard + BLOCK_BYTES) / 1e6:.1f} |")


if __name__ == "__main__":
    main()
