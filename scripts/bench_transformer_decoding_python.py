#!/usr/bin/env python3
"""Time Python's greedy decoding loop against mha's cached decoder, side by side.

The shapes of bench/transformer_decode_bench.cpp: a 6-layer
nn.TransformerDecoder (d_model 512, nhead 8, dim_feedforward 2048,
batch_first, eval, float32, torch.inference_mode(), one thread), memory of 64
positions, a 32-token prompt, then 128 generated tokens; tokens embedded by a
random (1000, 512) table and picked by argmax over the tied projection.
Python's loop re-runs the decoder on the whole prefix at every step (there is
no incremental decoding in nn.TransformerDecoder):

    for step in range(128):
        out = decoder(embed(tokens), memory, tgt_mask=causal(len), tgt_is_causal=True)
        tokens = cat(tokens, argmax(out[:, -1] @ embed.T))

Each round runs `transformer_decode_bench --greedy_round=N` (one cached greedy
decode after a warm-up, timed inside the process), then the Python loop once,
so both see the same machine load; the report gives the medians over rounds
and the median of the per-round ratios.

Usage: bench_transformer_decoding_python.py --cpp BUILD/bench/transformer_decode_bench
           [--rounds 3] [--batch 1 8] [--out FILE.json]
"""

import argparse
import json
import statistics
import subprocess
import time

import torch
from torch import nn

D_MODEL, NHEAD, FEEDFORWARD, LAYERS = 512, 8, 2048, 6
VOCAB, MEMORY, PROMPT, GENERATED = 1000, 64, 32, 128


def python_greedy(decoder, embedding, memory, prompt, generated):
    """Python's loop: the whole prefix through the decoder at every step."""
    tokens = prompt
    for _ in range(generated):
        length = tokens.size(1)
        causal = nn.Transformer.generate_square_subsequent_mask(length)
        out = decoder(nn.functional.embedding(tokens, embedding), memory, tgt_mask=causal,
                      tgt_is_causal=True)                                   # (N, L, E)
        next_token = (out[:, -1] @ embedding.T).argmax(-1, keepdim=True)   # (N, 1)
        tokens = torch.cat([tokens, next_token], 1)
    return tokens


def cpp_round(binary, n):
    out = subprocess.run([binary, f"--greedy_round={n}"], check=True, capture_output=True,
                         text=True).stdout
    return float(out.split("cached_ms")[1].split()[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpp", required=True, help="the transformer_decode_bench binary")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--out", help="write the per-round times as JSON")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(D_MODEL, NHEAD, FEEDFORWARD, batch_first=True)
    decoder = nn.TransformerDecoder(layer, LAYERS).eval()
    embedding = torch.randn(VOCAB, D_MODEL)
    results = {"torch": torch.__version__, "rounds": {}}
    print("| N | round | mha cached ms | Python loop ms | Python / mha |\n|---|---|---|---|---|")
    with torch.inference_mode():
        for n in args.batch:
            memory = torch.randn(n, MEMORY, D_MODEL)
            prompt = torch.randint(VOCAB, (n, PROMPT))
            python_greedy(decoder, embedding, memory, prompt, 2)  # warm-up
            rounds = []
            for r in range(args.rounds):
                cpp_ms = cpp_round(args.cpp, n)
                start = time.perf_counter()
                python_greedy(decoder, embedding, memory, prompt, GENERATED)
                py_ms = (time.perf_counter() - start) * 1e3
                rounds.append((cpp_ms, py_ms))
                print(f"| {n} | {r} | {cpp_ms:.1f} | {py_ms:.1f} | {py_ms / cpp_ms:.1f} |",
                      flush=True)
            results["rounds"][n] = rounds
    print("\n| N | median mha cached ms | median Python loop ms | median ratio Python / mha |"
          "\n|---|---|---|---|")
    for n, rounds in results["rounds"].items():
        cpp, py = zip(*rounds)
        ratio = statistics.median(p / c for c, p in rounds)
        print(f"| {n} | {statistics.median(cpp):.1f} | {statistics.median(py):.1f} "
              f"| {ratio:.1f}x |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
